#include <atomic>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>

#include "ring.hpp"

using xlatperf::OutstandingRing;
using Lookup = OutstandingRing::Lookup;

TEST_CASE("ring sizes are powers of two up to the 16-bit ID space") {
    CHECK_NOTHROW(OutstandingRing(1));
    CHECK_NOTHROW(OutstandingRing(65536));
    CHECK_THROWS_AS(OutstandingRing(0), std::invalid_argument);
    CHECK_THROWS_AS(OutstandingRing(48), std::invalid_argument);
    CHECK_THROWS_AS(OutstandingRing(131072), std::invalid_argument);
}

TEST_CASE("a published query is found by its ID until answered, then reads as answered") {
    OutstandingRing ring(16);
    OutstandingRing::Snapshot s;
    CHECK(ring.find(3, s) == Lookup::unknown);
    ring.publish(3, 300, 1000, 10);
    REQUIRE(ring.find(3, s) == Lookup::outstanding);
    CHECK(s.query_index == 300);
    CHECK(s.sent_ns == 1000);
    CHECK(s.sequence() == 3);
    CHECK(ring.find(4, s) == Lookup::unknown);
    CHECK(ring.find(3 + 16, s) == Lookup::unknown);  // same slot, other ID
    REQUIRE(ring.find(3, s) == Lookup::outstanding);
    CHECK(ring.mark_answered(s));
    CHECK_FALSE(ring.mark_answered(s));  // only once
    CHECK(ring.find(3, s) == Lookup::answered);
}

TEST_CASE("IDs are the sequence modulo 65536") {
    OutstandingRing ring(65536);
    OutstandingRing::Snapshot s;
    ring.publish(65536 + 7, 1, 0, 10);
    CHECK(ring.find(7, s) == Lookup::outstanding);
    CHECK(s.sequence() == 65536 + 7);
}

TEST_CASE("reusing a slot within the timeout of an unanswered query is an overrun") {
    OutstandingRing ring(4);
    CHECK_FALSE(ring.publish(0, 0, 1000, 100));
    CHECK(ring.publish(4, 4, 1050, 100));         // query 0 unanswered, sent 50 ns ago
    CHECK_FALSE(ring.publish(8, 8, 1200, 100));   // query 4 sent 150 ns ago: timed out
    OutstandingRing::Snapshot s;
    REQUIRE(ring.find(8, s) == Lookup::outstanding);
    ring.mark_answered(s);
    CHECK_FALSE(ring.publish(12, 12, 1201, 100));  // answered queries free their slot
}

TEST_CASE("a retracted query is no longer outstanding") {
    OutstandingRing ring(8);
    ring.publish(2, 2, 0, 10);
    ring.retract(2);
    OutstandingRing::Snapshot s;
    CHECK(ring.find(2, s) == Lookup::unknown);
}

TEST_CASE("a receiver racing the sender never sees a torn slot") {
    // The sender rewrites slots as fast as it can; every snapshot the receiver
    // accepts must have the fields of the sequence in its tag.
    OutstandingRing ring(8);
    std::atomic<bool> done{false};
    std::atomic<bool> started{false};
    std::uint64_t accepted = 0;
    std::uint64_t torn = 0;
    std::thread receiver([&] {
        OutstandingRing::Snapshot s;
        std::uint16_t id = 0;
        started = true;
        // Keep going until the sender is done and one more sweep of all IDs has passed.
        std::uint32_t after_done = 0;
        while (after_done <= 65536) {
            if (done.load(std::memory_order_relaxed)) ++after_done;
            if (ring.find(id, s) != Lookup::unknown) {
                ++accepted;
                if (s.query_index != s.sequence() * 3 + 1 || s.sent_ns != static_cast<std::int64_t>(s.sequence() * 7)) {
                    ++torn;
                }
                ring.mark_answered(s);
            }
            ++id;
        }
    });
    while (!started) std::this_thread::yield();
    for (std::uint64_t seq = 0; seq < 2'000'000; ++seq) {
        ring.publish(seq, seq * 3 + 1, static_cast<std::int64_t>(seq * 7), 0);
    }
    done = true;
    receiver.join();
    CHECK(torn == 0);
    CHECK(accepted > 0);
}
