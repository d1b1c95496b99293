#pragma once
// How the tester writes numbers in messages: units always named.

#include <cstddef>
#include <cstdint>
#include <string>

namespace xlatperf {

double seconds(std::int64_t ns);
std::string errno_name(std::size_t code);  // "ENOBUFS", or "errno 250" when unnamed
std::string percent(double ratio);         // "12.3400 %"
std::string duration_text(double s);       // "12.5 us", "3.000 ms", "1.500000 s"
std::string fixed(double v, int digits);

}  // namespace xlatperf
