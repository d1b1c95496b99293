#include "histogram.hpp"

#include <algorithm>
#include <cmath>

namespace xlatperf {
namespace {

constexpr std::uint64_t kHalf = std::uint64_t{1} << LatencyHistogram::kSubBucketBits;  // 1024

unsigned most_significant_bit(std::uint64_t v) { return 63u - static_cast<unsigned>(__builtin_clzll(v)); }

}  // namespace

LatencyHistogram::LatencyHistogram(std::uint64_t max_ns) : max_ns_(max_ns), counts_(index(max_ns) + 1, 0) {}

std::size_t LatencyHistogram::index(std::uint64_t ns) {
    if (ns < 2 * kHalf) return static_cast<std::size_t>(ns);
    const unsigned shift = most_significant_bit(ns) - kSubBucketBits;  // >= 1
    const std::uint64_t mantissa = ns >> shift;                          // in [1024, 2048)
    return static_cast<std::size_t>(2 * kHalf + (shift - 1) * kHalf + (mantissa - kHalf));
}

std::uint64_t LatencyHistogram::bucket_upper(std::size_t index) {
    if (index < 2 * kHalf) return index;
    const std::uint64_t above = index - 2 * kHalf;
    const unsigned shift = static_cast<unsigned>(above / kHalf) + 1;
    const std::uint64_t mantissa = kHalf + above % kHalf;
    return ((mantissa + 1) << shift) - 1;
}

std::uint64_t LatencyHistogram::bucket_width(std::uint64_t ns) {
    return ns < 2 * kHalf ? 1 : std::uint64_t{1} << (most_significant_bit(ns) - kSubBucketBits);
}

std::uint64_t LatencyHistogram::rank(double p, std::uint64_t n) {
    // The small subtraction keeps p × n = 9.000000000000002 from becoming rank 10.
    const double r = std::ceil(p * static_cast<double>(n) - 1e-9);
    return std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::max(r, 1.0)), 1, n);
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
    if (other.counts_.size() > counts_.size()) counts_.resize(other.counts_.size(), 0);
    for (std::size_t i = 0; i < other.counts_.size(); ++i) counts_[i] += other.counts_[i];
    count_ += other.count_;
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
    max_ns_ = std::max(max_ns_, other.max_ns_);
}

std::uint64_t LatencyHistogram::percentile(double p) const {
    if (count_ == 0) return 0;
    const std::uint64_t wanted = rank(p, count_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
        seen += counts_[i];
        if (seen >= wanted) return std::clamp(bucket_upper(i), min_, max_);
    }
    return max_;
}

}  // namespace xlatperf
