# Four programs, one idea each, run in this order by make run-03.
03-context-stack_PROGRAMS := push_pop synchronize_scope memory_lifetime thread_stacks
