#pragma once
// CPU lists as taskset and the kernel write them: "0", "0,2", "1-3,6".

#include <string>
#include <vector>

namespace xlatperf {

// The CPUs of `text` in the order written (ranges expanded); throws
// std::invalid_argument with a one-line reason on bad syntax or duplicates.
std::vector<int> parse_cpu_list(const std::string& text);

// "0-3,6" for {0,1,2,3,6}.
std::string format_cpu_list(std::vector<int> cpus);

// The CPUs this process may run on right now.
std::vector<int> allowed_cpus();

}  // namespace xlatperf
