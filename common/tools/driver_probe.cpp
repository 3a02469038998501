// driver-probe — run by `make run` before any lesson. It does not link libcuda,
// so on a machine without the NVIDIA driver it can still explain what is missing
// instead of letting each lesson die with a dynamic-loader error.
// `driver-probe --machine` prints "<name of device 0> | devices: N" and nothing else:
// the machine a README's expected output was captured on (tests/test_docs.cpp).
#include <cstdio>
#include <string>

#include "../course_util.h"
#include "dynamic_driver.h"

int main(int argc, char** argv) {
    const course::DynamicDriver driver;
    const bool machineOnly = argc == 2 && std::string(argv[1]) == "--machine";
    if (driver.usable() && machineOnly) {
        std::printf("%s | devices: %d\n", driver.deviceName(0).c_str(), driver.deviceCount());
        return 0;
    }
    if (driver.usable()) {
        std::printf("NVIDIA driver found: CUDA %s, %d device(s)\n",
                    course::formatCudaVersion(driver.driverVersion()).c_str(), driver.deviceCount());
        return 0;
    }
    std::fprintf(stderr,
                 "Cannot run the lessons: %s.\n"
                 "The lessons need an NVIDIA GPU and its driver (libcuda.so.1, installed with the driver,\n"
                 "not with the CUDA toolkit). On a machine without one you can still:\n"
                 "  make        build every lesson\n"
                 "  make test   run the CPU tests (the GPU tests skip and say why)\n"
                 "Check `nvidia-smi`, and that CUDA_VISIBLE_DEVICES does not hide every GPU.\n",
                 driver.problem().c_str());
    return 1;
}
