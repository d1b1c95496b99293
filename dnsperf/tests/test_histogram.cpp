#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "histogram.hpp"

using xlatperf::LatencyHistogram;

namespace {

// The nearest-rank percentile of the exact samples.
std::uint64_t exact_percentile(std::vector<std::uint64_t> sorted, double p) {
    std::sort(sorted.begin(), sorted.end());
    return sorted[LatencyHistogram::rank(p, sorted.size()) - 1];
}

}  // namespace

TEST_CASE("buckets are exact below 2048 ns and 1/1024 of their value wide above") {
    for (std::uint64_t v = 0; v < 2048; ++v) {
        CHECK(LatencyHistogram::bucket_upper(LatencyHistogram::index(v)) == v);
    }
    std::mt19937_64 random(1);
    for (int i = 0; i < 100000; ++i) {
        const std::uint64_t v = random() >> (random() % 40 + 20);
        const std::size_t index = LatencyHistogram::index(v);
        const std::uint64_t upper = LatencyHistogram::bucket_upper(index);
        INFO("value " << v);
        REQUIRE(upper >= v);
        REQUIRE(upper - v < LatencyHistogram::bucket_width(v));
        REQUIRE(static_cast<double>(LatencyHistogram::bucket_width(v)) <= std::max(1.0, static_cast<double>(v) / 1024));
        REQUIRE(LatencyHistogram::index(upper) == index);
        REQUIRE(LatencyHistogram::index(upper + 1) == index + 1);
    }
}

TEST_CASE("percentiles match an exact sort of the same samples within one bucket") {
    std::mt19937_64 random(42);
    for (const std::size_t n : {1u, 2u, 7u, 10u, 999u, 1000u, 1001u, 100000u}) {
        // Log-uniform between 1 us and 250 ms, as latencies spread.
        std::uniform_real_distribution<double> exponent(3, std::log10(250e6));
        std::vector<std::uint64_t> samples;
        LatencyHistogram histogram(250'000'000);
        for (std::size_t i = 0; i < n; ++i) {
            const auto v = static_cast<std::uint64_t>(std::pow(10.0, exponent(random)));
            samples.push_back(v);
            histogram.record(v);
        }
        CHECK(histogram.count() == n);
        CHECK(histogram.min() == *std::min_element(samples.begin(), samples.end()));
        CHECK(histogram.max() == *std::max_element(samples.begin(), samples.end()));
        for (const double p : {0.5, 0.9, 0.99, 0.999, 1.0}) {
            const std::uint64_t exact = exact_percentile(samples, p);
            const std::uint64_t estimate = histogram.percentile(p);
            INFO("n " << n << " p " << p << " exact " << exact << " estimate " << estimate);
            CHECK(estimate >= exact);
            CHECK(estimate - exact < LatencyHistogram::bucket_width(exact));
            CHECK(estimate == std::min(LatencyHistogram::bucket_upper(LatencyHistogram::index(exact)), histogram.max()));
        }
    }
}

TEST_CASE("nearest rank follows its definition") {
    CHECK(LatencyHistogram::rank(0.5, 10) == 5);
    CHECK(LatencyHistogram::rank(0.9, 10) == 9);
    CHECK(LatencyHistogram::rank(0.99, 10) == 10);
    CHECK(LatencyHistogram::rank(0.999, 1000) == 999);
    CHECK(LatencyHistogram::rank(0.5, 1) == 1);
    CHECK(LatencyHistogram::rank(1.0, 7) == 7);
}

TEST_CASE("merged histograms equal one histogram of all samples") {
    LatencyHistogram a(1'000'000), b(1'000'000), all(1'000'000);
    std::mt19937_64 random(7);
    for (int i = 0; i < 5000; ++i) {
        const std::uint64_t v = random() % 1'000'000;
        (i % 3 ? a : b).record(v);
        all.record(v);
    }
    a.merge(b);
    CHECK(a.count() == all.count());
    CHECK(a.min() == all.min());
    CHECK(a.max() == all.max());
    for (const double p : {0.5, 0.9, 0.99, 0.999}) CHECK(a.percentile(p) == all.percentile(p));
}

TEST_CASE("an empty histogram reports zeros; values beyond its range land in its last bucket") {
    LatencyHistogram h(1000);
    CHECK(h.count() == 0);
    CHECK(h.percentile(0.5) == 0);
    CHECK(h.min() == 0);
    h.record(5000);
    CHECK(h.max() == 5000);
    CHECK(h.percentile(0.5) == 5000);
}
