#include "format.hpp"

#include <cstring>
#include <iomanip>
#include <sstream>

namespace xlatperf {

double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

std::string errno_name(std::size_t code) {
    const char* name = strerrorname_np(static_cast<int>(code));
    return name != nullptr ? name : "errno " + std::to_string(code);
}

std::string percent(double ratio) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(4) << ratio * 100 << " %";
    return out.str();
}

std::string duration_text(double s) {
    std::ostringstream out;
    if (s < 1e-3) {
        out << std::fixed << std::setprecision(1) << s * 1e6 << " us";
    } else if (s < 1) {
        out << std::fixed << std::setprecision(3) << s * 1e3 << " ms";
    } else {
        out << std::fixed << std::setprecision(6) << s << " s";
    }
    return out.str();
}

std::string fixed(double v, int digits) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(digits) << v;
    return out.str();
}

}  // namespace xlatperf
