# Six programs, one idea each, run in this order by make run-03.
03-context-stack_PROGRAMS := push_pop synchronize_scope memory_lifetime memory_owner thread_stacks context_identity
# push_pop, memory_lifetime, memory_owner and thread_stacks compare free device memory: the tests run them with nothing beside them.
03-context-stack_RUN_ALONE := push_pop memory_lifetime memory_owner thread_stacks
