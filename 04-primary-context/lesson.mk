# Four programs, one idea each, run in this order by make run-04.
04-primary-context_PROGRAMS := retain_release shared_by_threads context_costs reset
# context_costs --bench: more timing runs and "bench:" lines for make bench.
04-primary-context_BENCH := context_costs
# context_costs times context creation, but its one check has a margin of 10x where the README's
# captured H200 run shows about a million-fold: it runs beside other programs in the tests.
