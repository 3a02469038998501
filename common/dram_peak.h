// dram_peak.h — a GPU's theoretical DRAM bandwidth from two device attributes. Arithmetic
// only, no driver calls, so a CPU test checks it with known numbers.
//
// cuda.h says only that CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE is the "Peak memory clock
// frequency in kilohertz" and CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH the "Global memory bus
// width in bits". The factor 2 is this course's assumption, not the header's: that the memory
// moves data on both clock edges (double data rate), two transfers per clock, each as wide as
// the bus. It gives the data sheets' figures for the GPUs the course ran on: H100 SXM,
// 2 x 2619000 kHz x 5120 bits / 8 = 3352.3 GB/s (3.35 TB/s on its data sheet).
#pragma once

namespace course {

// GB/s (10^9 bytes per second). 0 when the driver reports no clock or no width, as it may
// for memory it does not own (integrated GPUs share the system's).
constexpr double dramPeakGBs(long long memoryClockKHz, long long busWidthBits) {
    if (memoryClockKHz <= 0 || busWidthBits <= 0) return 0.0;
    const double transfersPerSecond = 2.0 * static_cast<double>(memoryClockKHz) * 1e3;
    const double bytesPerTransfer = static_cast<double>(busWidthBits) / 8.0;
    return transfersPerSecond * bytesPerTransfer / 1e9;
}

}  // namespace course
