# Four programs, one idea each, run in this order by make run-04.
04-primary-context_PROGRAMS := retain_release shared_by_threads context_costs reset
# context_costs --bench: more timing runs and "bench:" lines for make bench.
04-primary-context_BENCH := context_costs
# context_costs times context creation and retains: the tests run it with nothing beside it.
04-primary-context_RUN_ALONE := context_costs
