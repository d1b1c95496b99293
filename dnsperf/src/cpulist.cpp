#include "cpulist.hpp"

#include <algorithm>
#include <cerrno>
#include <sched.h>
#include <set>
#include <stdexcept>

namespace xlatperf {
namespace {

int parse_cpu(const std::string& text, const std::string& whole) {
    if (text.empty() || text.size() > 5 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        throw std::invalid_argument("bad CPU list '" + whole + "': expected numbers and ranges like 0,2-3");
    }
    const int cpu = std::stoi(text);
    if (cpu >= CPU_SETSIZE) {
        throw std::invalid_argument("bad CPU list '" + whole + "': CPU " + text + " is beyond the kernel's limit");
    }
    return cpu;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
    std::vector<int> cpus;
    std::set<int> seen;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, comma - start);
        const std::size_t dash = item.find('-');
        const int first = parse_cpu(item.substr(0, dash), text);
        const int last = dash == std::string::npos ? first : parse_cpu(item.substr(dash + 1), text);
        if (last < first) {
            throw std::invalid_argument("bad CPU list '" + text + "': range " + item + " runs backwards");
        }
        for (int cpu = first; cpu <= last; ++cpu) {
            if (!seen.insert(cpu).second) {
                throw std::invalid_argument("bad CPU list '" + text + "': CPU " + std::to_string(cpu) +
                                            " appears twice");
            }
            cpus.push_back(cpu);
        }
        start = comma + 1;
    }
    return cpus;
}

std::string format_cpu_list(std::vector<int> cpus) {
    std::sort(cpus.begin(), cpus.end());
    std::string out;
    for (std::size_t i = 0; i < cpus.size();) {
        std::size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(cpus[i]);
        if (j > i) out += '-' + std::to_string(cpus[j]);
        i = j + 1;
    }
    return out;
}

std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
    return cpus;
}

}  // namespace xlatperf
