#pragma once
// Flows without sockets. A flow is one (tester address, source port) pair out
// of the --source ranges: F = the sum over sources of their port counts, so a
// trial can spread its queries over 10^3 .. 10^7 distinct 5-tuples without a
// socket (or an fd) each.
//
// Query k goes to flow position j = k mod F (each round of F queries visits
// every flow once) as that flow's q-th query, q = k div F; its transaction ID
// is q mod 65536 and q div 65536 is its 0x20 epoch, as on a socket. The order
// of the flows within a round is sequential, or pseudorandom (RFC 4814 §4.5: a
// keyed permutation of the F flows, a 4-round Feistel network with cycle
// walking, so every flow is still used once per round and a reply's flow maps
// back to its position).
//
// The matching state (FlowTable) is one ring of in-flight queries indexed by k,
// not a table per flow: 16 bytes per slot (tag + send time), sized from rate ×
// timeout, so memory follows the queries in flight, never the number of flows.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "address.hpp"
#include "ring.hpp"

namespace xlatperf::xdp {

enum class FlowOrder { sequential, pseudorandom };

class FlowPermutation {
public:
    // A permutation of [0, size); `seed` keys the pseudorandom order.
    FlowPermutation(std::uint64_t size, FlowOrder order, std::uint64_t seed);
    std::uint64_t forward(std::uint64_t position) const;   // position in the round -> flow
    std::uint64_t inverse(std::uint64_t flow) const;       // flow -> position in the round

private:
    std::uint64_t encrypt(std::uint64_t x) const;
    std::uint64_t decrypt(std::uint64_t x) const;
    std::uint64_t round(std::uint64_t half, unsigned r) const;

    std::uint64_t size_;
    FlowOrder order_;
    unsigned half_bits_ = 1;
    std::array<std::uint64_t, 4> keys_{};
};

class FlowSpace {
public:
    // Every source needs at least one port range (ephemeral ports need a socket).
    // Throws std::invalid_argument.
    FlowSpace(std::vector<Source> sources, FlowOrder order, std::uint64_t seed);

    std::uint64_t size() const { return size_; }
    int family() const { return family_; }
    const std::vector<Source>& sources() const { return sources_; }
    const FlowPermutation& permutation() const { return permutation_; }

    struct Endpoint {
        const std::uint8_t* address = nullptr;  // 4 or 16 bytes, network order
        std::uint16_t port = 0;                 // host order
        std::size_t source = 0;                 // index into sources()
    };
    // Flow number -> its address and port.
    Endpoint endpoint(std::uint64_t flow) const;
    // Address and port -> flow number; false when no source has them.
    bool flow_of(const std::uint8_t* address, std::uint16_t port, std::uint64_t& flow) const;
    const std::string& source_text(std::size_t source) const { return sources_[source].text; }
    // What the table takes: per source (address, port ranges), never per flow.
    std::size_t memory_bytes() const;

private:
    std::vector<Source> sources_;
    std::vector<std::array<std::uint8_t, 16>> addresses_;
    std::vector<std::uint64_t> first_flow_;     // flow number of each source's first port
    std::uint64_t size_ = 0;
    int family_ = AF_INET;
    FlowPermutation permutation_;
};

// Bytes of matching state per in-flight query slot.
constexpr std::size_t kFlowSlotBytes = 16;

class FlowTable {
public:
    using Snapshot = OutstandingRing::Snapshot;
    using Lookup = OutstandingRing::Lookup;
    using State = OutstandingRing::State;

    // `flows`: F; `slots`: a power of two, at least the queries in flight
    // (rate × timeout), at most F × 65536 (so one ID names one live query of a flow).
    FlowTable(std::uint64_t flows, std::uint64_t slots);

    std::uint64_t slots() const { return mask_ + 1; }
    std::uint64_t bytes() const { return slots() * kFlowSlotBytes; }

    // Flow position, per-flow sequence and ID of query k.
    std::uint64_t position(std::uint64_t k) const { return k % flows_; }
    std::uint64_t sequence(std::uint64_t k) const { return k / flows_; }
    static std::uint16_t id_of(std::uint64_t sequence) { return static_cast<std::uint16_t>(sequence); }

    // Sender side, queries in increasing k. True when the slot still held an
    // unanswered query younger than the timeout (too many in flight).
    bool publish(std::uint64_t k, std::int64_t sent_ns, std::int64_t timeout_ns);

    // The queries of one flow position, as the reply classifier sees a socket's ring.
    class View {
    public:
        using Snapshot = FlowTable::Snapshot;
        using Lookup = FlowTable::Lookup;
        Lookup find(std::uint16_t id, Snapshot& out) const;
        bool mark_answered(const Snapshot& snapshot);

    private:
        friend class FlowTable;
        View(FlowTable& table, std::uint64_t position) : table_(table), position_(position) {}
        FlowTable& table_;
        std::uint64_t position_;
    };
    View view(std::uint64_t position) { return View(*this, position); }

private:
    struct Slot {
        std::atomic<std::uint64_t> tag{0};     // (k << 2) | state
        std::atomic<std::int64_t> sent_ns{0};
    };
    static_assert(sizeof(Slot) == kFlowSlotBytes, "slot size is stated in the docs and the JSON");

    std::uint64_t flows_;
    std::uint64_t mask_;
    std::unique_ptr<Slot[]> slots_;
    std::atomic<std::uint64_t> published_{0};  // queries published: k < published_
};

}  // namespace xlatperf::xdp
