// pcie_link.h — the theoretical rate of a GPU's PCIe link, read from Linux sysfs.
//
// The kernel describes every PCI device under /sys/bus/pci/devices/<address>/, where
// <address> is "domain:bus:device.function" in lower-case hex ("0000:19:00.0"):
//   current_link_speed   the transfer rate per lane now: "32.0 GT/s PCIe" (kernels
//                        since 4.17 add " PCIe"; older ones write "8 GT/s"; "Unknown"
//                        or "Unknown speed" when the link is down)
//   current_link_width   the number of lanes now: "16" (0 when the link is down)
// A lane moves one bit per transfer, in each direction at once, but not every bit is
// data: the line encoding spends some of them.
//   2.5 and 5 GT/s (PCIe 1.x, 2.x):  8b/10b,    8 data bits in every 10
//   8, 16, 32 GT/s (PCIe 3.0 - 5.0): 128b/130b, 128 data bits in every 130
//   64 GT/s (PCIe 6.0, FLIT mode):   242 of every 256 bytes of a flit (the rest is CRC and FEC)
// so one direction carries at most  GT/s x lanes x encoding / 8  GB/s (1e9 bytes).
// Packet headers and flow control take a further share that depends on the payload
// size, so a real copy stays some percent below this figure.
//
// Header-only and free of CUDA: the lesson passes the root "/sys" and the bus id that
// cuDeviceGetPCIBusId gives; the tests pass a fake sysfs tree (tests/fixtures/).
#pragma once

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace pcie {

struct Link {
    bool known = false;               // false: see `reason`
    std::string reason;               // why the rate is not known; empty when it is
    std::string device;               // the sysfs folder name, "0000:19:00.0"
    double gigaTransfers = 0.0;       // per lane, per second: 32.0
    int lanes = 0;                    // 16
    int generation = 0;               // 5
    const char* encoding = "";        // "128b/130b"
    double efficiency = 0.0;          // 128.0 / 130.0
    double gigabytesPerSecond = 0.0;  // one direction: 63.02
};

// "00000000:19:00.0" (as CUDA writes it) -> "0000:19:00.0" (as sysfs names it): lower
// case, and the domain's leading zeros beyond four digits dropped.
inline std::string sysfsDeviceName(const std::string& busId) {
    std::string name;
    for (const char c : busId) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string::size_type colon = name.find(':');
    if (colon == std::string::npos) return name;
    std::string::size_type drop = 0;
    while (colon - drop > 4 && name[drop] == '0') ++drop;
    return name.substr(drop);
}

// "32.0 GT/s PCIe", "8 GT/s", "2.5 GT/s" -> GT/s; 0 for anything else ("Unknown", garbage).
inline double parseLinkSpeed(const std::string& text) {
    const char* begin = text.c_str();
    char* end = nullptr;
    const double value = std::strtod(begin, &end);
    if (end == begin || value <= 0.0) return 0.0;
    const std::string rest(end);
    return rest == " GT/s" || rest == " GT/s PCIe" ? value : 0.0;
}

// "16" -> 16; 0 for anything else ("x16", "", "0").
inline int parseLinkWidth(const std::string& text) {
    if (text.empty() || text.size() > 3) return 0;
    for (const char c : text)
        if (!std::isdigit(static_cast<unsigned char>(c))) return 0;
    return std::atoi(text.c_str());
}

// The generation, encoding and rate for a link speed and width. Unknown speeds give a
// Link with known = false and the reason.
inline Link linkRate(double gigaTransfers, int lanes) {
    Link link;
    link.gigaTransfers = gigaTransfers;
    link.lanes = lanes;
    struct Generation {
        double gigaTransfers;
        int generation;
        const char* encoding;
        double efficiency;
    };
    static constexpr Generation kGenerations[] = {
        {2.5, 1, "8b/10b", 8.0 / 10.0},        {5.0, 2, "8b/10b", 8.0 / 10.0},
        {8.0, 3, "128b/130b", 128.0 / 130.0},  {16.0, 4, "128b/130b", 128.0 / 130.0},
        {32.0, 5, "128b/130b", 128.0 / 130.0}, {64.0, 6, "FLIT 242/256", 242.0 / 256.0},
    };
    for (const Generation& g : kGenerations) {
        if (gigaTransfers != g.gigaTransfers) continue;
        link.generation = g.generation;
        link.encoding = g.encoding;
        link.efficiency = g.efficiency;
    }
    if (link.generation == 0) {
        char text[96];
        std::snprintf(text, sizeof(text), "link speed %g GT/s is no PCIe generation this code knows", gigaTransfers);
        link.reason = text;
        return link;
    }
    if (lanes <= 0) {
        link.reason = "link width is 0 (the link is down)";
        return link;
    }
    link.gigabytesPerSecond = gigaTransfers * lanes * link.efficiency / 8.0;
    link.known = true;
    return link;
}

// The link of the PCI device `busId` (as cuDeviceGetPCIBusId gives it) under the sysfs
// root `sysfsRoot` ("/sys"). `which` is "current" (the link now) or "max" (what the
// device and slot could do).
inline Link readLink(const std::string& sysfsRoot, const std::string& busId, const std::string& which = "current") {
    const std::string device = sysfsDeviceName(busId);
    const std::string folder = sysfsRoot + "/bus/pci/devices/" + device + "/";
    auto readLine = [](const std::string& path, std::string& line) {
        std::ifstream file(path);
        return static_cast<bool>(std::getline(file, line));
    };
    std::string speedText;
    std::string widthText;
    Link link;
    if (!readLine(folder + which + "_link_speed", speedText)) {
        link.reason = "cannot read " + folder + which + "_link_speed (no PCIe link in sysfs here)";
    } else if (!readLine(folder + which + "_link_width", widthText)) {
        link.reason = "cannot read " + folder + which + "_link_width";
    } else if (const double speed = parseLinkSpeed(speedText); speed == 0.0) {
        link.reason = which + "_link_speed reads '" + speedText + "', not a rate";
    } else if (const int lanes = parseLinkWidth(widthText); lanes == 0) {
        link = linkRate(speed, 0);
        if (widthText != "0") link.reason = which + "_link_width reads '" + widthText + "', not a lane count";
    } else {
        link = linkRate(speed, lanes);
    }
    link.device = device;
    return link;
}

}  // namespace pcie
