#pragma once
// Latency histogram with a stated resolution: exact to 1 ns below 2048 ns, and
// buckets 2^-10 (0.098 %) of their value wide above. Its size follows the
// largest value it must hold (the timeout), never the number of samples.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace xlatperf {

class LatencyHistogram {
public:
    static constexpr unsigned kSubBucketBits = 10;
    static constexpr double kRelativeResolution = 1.0 / (1u << kSubBucketBits);
    static constexpr double kResolutionNs = 1.0;

    // Values above max_ns are counted in the last bucket (and in max()).
    explicit LatencyHistogram(std::uint64_t max_ns);

    void record(std::uint64_t ns) {
        ++counts_[index(ns < max_ns_ ? ns : max_ns_)];
        ++count_;
        if (ns < min_) min_ = ns;
        if (ns > max_) max_ = ns;
    }
    void merge(const LatencyHistogram& other);

    std::uint64_t count() const { return count_; }
    std::uint64_t min() const { return count_ ? min_ : 0; }
    std::uint64_t max() const { return max_; }

    // Nearest-rank percentile (p in (0, 1]): the upper edge of the bucket holding
    // the sample of rank ceil(p × count), clamped to [min, max]. So the exact
    // sample value v satisfies v <= result <= v + bucket_width(v) - 1.
    std::uint64_t percentile(double p) const;

    static std::size_t index(std::uint64_t ns);
    static std::uint64_t bucket_upper(std::size_t index);
    static std::uint64_t bucket_width(std::uint64_t ns);

    // Rank of the sample that is the p-th percentile of n samples (1-based).
    static std::uint64_t rank(double p, std::uint64_t n);

private:
    std::uint64_t max_ns_;
    std::vector<std::uint64_t> counts_;
    std::uint64_t count_ = 0;
    std::uint64_t min_ = UINT64_MAX;
    std::uint64_t max_ = 0;
};

}  // namespace xlatperf
