# Lesson 24 settings (the Makefile's header lists them).

# Seven short programs, run in this order by make run-24: stream priorities (the range, the
# clamping, a short kernel's latency beside a flood), what a stream says about itself and its
# attributes, host functions and callbacks in stream order, stream memory operations, events
# (an external record in a capture, a whole context recorded and waited for, async
# notifications), events between green contexts, and how soon a host thread wakes.
24-streams-and-events_PROGRAMS := priorities stream_info host_work mem_ops events green_events wake_latency

# priorities and wake_latency have a --bench mode: make bench runs them.
24-streams-and-events_BENCH := priorities wake_latency
# Both time something: the tests run them with nothing beside them.
24-streams-and-events_RUN_ALONE := priorities wake_latency
