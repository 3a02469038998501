# 13-ipc compares free device memory after a child dies: the tests run it with nothing beside it.
13-ipc_RUN_ALONE := 13-ipc
