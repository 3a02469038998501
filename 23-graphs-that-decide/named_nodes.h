// named_nodes.h — introspect's bookkeeping: graph nodes with the names the program prints them by,
// a node's position among them, and two lists of nodes compared as sets.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace lesson23 {

struct Named {
    CUgraphNode node;
    const char* name;
};

// Where a node stands in `names` (names.size() for a node not there): the order lines are printed in.
inline size_t indexOf(CUgraphNode node, const std::vector<Named>& names) {
    for (size_t i = 0; i < names.size(); ++i)
        if (names[i].node == node) return i;
    return names.size();
}

inline const char* nameAt(size_t index, const std::vector<Named>& names) {
    return index < names.size() ? names[index].name : "(unknown)";
}

// Whether `a` and `b` hold the same nodes, in whatever order (cuda.h names none for the queries).
inline bool sameSet(std::vector<CUgraphNode> a, std::vector<CUgraphNode> b) {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return a == b;
}

}  // namespace lesson23
