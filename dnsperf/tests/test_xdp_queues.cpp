// Several AF_XDP queues share one matching state: pair i's sender publishes
// the queries k = i, i + T, ... into the one flow table, and a reply is read by
// the receiver of whichever queue the server side's hash puts its flow on, so
// a receiver matches queries that another thread sent. These tests run the
// flow table's protocol from several threads the way xdp_io.cpp does (each
// slot written by the sender of its query, answered by compare-and-swap, every
// counter owned by one thread) and check every count against the schedule;
// the Makefile's TSan stage runs them ([#test_xdp_queues]).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "xdp/flows.hpp"

using namespace xlatperf::xdp;

namespace {

// The encoded send time of query k: a torn or misplaced slot shows as another value.
std::int64_t stamp(std::uint64_t k) { return static_cast<std::int64_t>(k * 3 + 1); }

}  // namespace

TEST_CASE("three senders, three receivers: every query matched once by the receiver of its flow's queue",
          "[xdp_queues]") {
    constexpr unsigned kPairs = 3;
    constexpr std::uint64_t kFlowsPerPair = 6;
    constexpr std::uint64_t kFlows = kPairs * kFlowsPerPair;  // F = T x K, as xlatperf's flows
    constexpr std::uint64_t kTotal = 1'500'000;               // 83 334 per flow: their IDs wrap
    constexpr std::uint64_t kSlots = 256;                     // not a multiple of F: a slot's next writer is another sender
    FlowTable table(kFlows, kSlots);
    // The wire between the threads carries no ordering (the kernel's rings would): only the
    // table's own atomics may order a sender's slot writes before a receiver's reads.
    std::vector<std::atomic<std::uint64_t>> published(kFlows);   // per flow: its queries published (one sender writes)
    std::vector<std::atomic<std::uint64_t>> answered(kFlows);    // per flow: its queries answered (one receiver writes)
    // A flow's replies go to one queue, not the one its queries left by: receiver r takes the
    // flows at positions 3r..3r+2 mod 9, which three different senders sent.
    const auto queue_of = [](std::uint64_t position) { return static_cast<unsigned>((position / kPairs) % kPairs); };
    std::vector<std::uint64_t> overruns(kPairs, 0);
    std::vector<std::uint64_t> valid(kPairs, 0);
    std::vector<std::uint64_t> from_other_queue(kPairs, 0);
    std::vector<std::uint64_t> wrong(kPairs, 0);
    std::vector<std::uint64_t> duplicates(kPairs, 0);

    std::vector<std::thread> threads;
    for (unsigned i = 0; i < kPairs; ++i) {
        threads.emplace_back([&, i] {
            for (std::uint64_t k = i; k < kTotal; k += kPairs) {
                // The slot's previous query (another flow's, another sender's) must have its reply
                // first, as the timeout guarantees in a trial; here the receivers set the pace.
                if (k >= kSlots) {
                    const std::uint64_t old = k - kSlots;
                    while (answered[table.position(old)].load(std::memory_order_relaxed) <= table.sequence(old)) {
                        std::this_thread::yield();
                    }
                }
                if (table.publish(k, stamp(k), 1'000'000'000)) ++overruns[i];
                published[table.position(k)].store(table.sequence(k) + 1, std::memory_order_relaxed);
            }
        });
    }
    for (unsigned r = 0; r < kPairs; ++r) {
        threads.emplace_back([&, r] {
            std::vector<std::uint64_t> mine;
            for (std::uint64_t p = 0; p < kFlows; ++p) {
                if (queue_of(p) == r) mine.push_back(p);
            }
            std::vector<std::uint64_t> next(mine.size(), 0);
            std::uint64_t left = 0;
            for (const std::uint64_t p : mine) left += (kTotal - p + kFlows - 1) / kFlows;
            while (left > 0) {
                bool idle = true;
                for (std::size_t f = 0; f < mine.size(); ++f) {
                    const std::uint64_t p = mine[f];
                    if (next[f] >= published[p].load(std::memory_order_relaxed)) continue;
                    idle = false;
                    const std::uint64_t q = next[f];
                    const std::uint64_t k = p + q * kFlows;
                    auto view = table.view(p);
                    FlowTable::Snapshot s;
                    FlowTable::Lookup found = view.find(static_cast<std::uint16_t>(q), s);
                    while (found == FlowTable::Lookup::unknown) {  // the table's publication not seen yet
                        std::this_thread::yield();
                        found = view.find(static_cast<std::uint16_t>(q), s);
                    }
                    if (found != FlowTable::Lookup::outstanding || s.query_index != k || s.sent_ns != stamp(k) ||
                        s.sequence() != q || !view.mark_answered(s)) {
                        ++wrong[r];
                    } else {
                        ++valid[r];
                        if (p % kPairs != r) ++from_other_queue[r];
                    }
                    // The same reply again: a duplicate, never a second valid.
                    if (view.find(static_cast<std::uint16_t>(q), s) == FlowTable::Lookup::answered &&
                        !view.mark_answered(s)) {
                        ++duplicates[r];
                    }
                    ++next[f];
                    answered[p].store(q + 1, std::memory_order_relaxed);
                    --left;
                }
                if (idle) std::this_thread::yield();
            }
        });
    }
    for (auto& t : threads) t.join();
    std::uint64_t all_valid = 0;
    for (unsigned r = 0; r < kPairs; ++r) {
        CHECK(overruns[r] == 0);
        CHECK(wrong[r] == 0);
        // Receiver r reads 3 flows x 83 334 or 83 333 replies, two thirds of them sent by other queues.
        CHECK(valid[r] == duplicates[r]);
        CHECK(from_other_queue[r] * 3 >= valid[r] * 2 - 3);
        all_valid += valid[r];
    }
    CHECK(all_valid == kTotal);
}

TEST_CASE("two receivers given the same replies: each query is answered exactly once", "[xdp_queues]") {
    constexpr std::uint64_t kFlows = 2;
    constexpr std::uint64_t kTotal = 100'000;
    FlowTable table(kFlows, 131072);
    for (std::uint64_t k = 0; k < kTotal; ++k) table.publish(k, stamp(k), 0);
    std::vector<std::uint64_t> wins(2, 0);
    std::vector<std::uint64_t> lost(2, 0);
    std::vector<std::thread> threads;
    for (unsigned r = 0; r < 2; ++r) {
        threads.emplace_back([&, r] {
            for (std::uint64_t k = 0; k < kTotal; ++k) {
                auto view = table.view(table.position(k));
                FlowTable::Snapshot s;
                const auto found = view.find(static_cast<std::uint16_t>(table.sequence(k)), s);
                if (found == FlowTable::Lookup::outstanding && s.query_index == k && view.mark_answered(s)) {
                    ++wins[r];
                } else {
                    ++lost[r];
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK(wins[0] + wins[1] == kTotal);
    CHECK(lost[0] + lost[1] == kTotal);
}
