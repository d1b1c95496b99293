#include "xdp/flows.hpp"

#include <algorithm>
#include <cstring>
#include <netinet/in.h>
#include <stdexcept>
#include <string>

namespace xlatperf::xdp {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace

FlowPermutation::FlowPermutation(std::uint64_t size, FlowOrder order, std::uint64_t seed)
    : size_(size), order_(order) {
    if (size == 0) throw std::invalid_argument("a flow permutation needs at least one flow");
    while ((std::uint64_t{1} << (2 * half_bits_)) < size) ++half_bits_;
    for (unsigned r = 0; r < keys_.size(); ++r) keys_[r] = mix(seed + r);
}

std::uint64_t FlowPermutation::round(std::uint64_t half, unsigned r) const {
    return mix(half ^ keys_[r]) & ((std::uint64_t{1} << half_bits_) - 1);
}

std::uint64_t FlowPermutation::encrypt(std::uint64_t x) const {
    const std::uint64_t mask = (std::uint64_t{1} << half_bits_) - 1;
    std::uint64_t left = x >> half_bits_, right = x & mask;
    for (unsigned r = 0; r < keys_.size(); ++r) {
        const std::uint64_t next = left ^ round(right, r);
        left = right;
        right = next;
    }
    return (left << half_bits_) | right;
}

std::uint64_t FlowPermutation::decrypt(std::uint64_t x) const {
    const std::uint64_t mask = (std::uint64_t{1} << half_bits_) - 1;
    std::uint64_t left = x >> half_bits_, right = x & mask;
    for (unsigned r = static_cast<unsigned>(keys_.size()); r-- > 0;) {
        const std::uint64_t previous = right ^ round(left, r);
        right = left;
        left = previous;
    }
    return (left << half_bits_) | right;
}

// Cycle walking: the Feistel network permutes [0, 4^half_bits) (< 4 × size), so
// re-applying it until the value falls inside [0, size) permutes [0, size).
std::uint64_t FlowPermutation::forward(std::uint64_t position) const {
    if (order_ == FlowOrder::sequential) return position;
    std::uint64_t x = encrypt(position);
    while (x >= size_) x = encrypt(x);
    return x;
}

std::uint64_t FlowPermutation::inverse(std::uint64_t flow) const {
    if (order_ == FlowOrder::sequential) return flow;
    std::uint64_t x = decrypt(flow);
    while (x >= size_) x = decrypt(x);
    return x;
}

FlowSpace::FlowSpace(std::vector<Source> sources, FlowOrder order, std::uint64_t seed)
    : sources_(std::move(sources)), permutation_([this, order, seed] {
          std::uint64_t total = 0;
          for (const Source& s : sources_) {
              if (s.ranges.empty()) {
                  throw std::invalid_argument("source " + s.text +
                                              " has no port range: flows without sockets need explicit ports "
                                              "(example: 192.0.2.8,1024-65535)");
              }
              total += s.port_count();
          }
          if (total == 0) throw std::invalid_argument("no source address given");
          return FlowPermutation(total, order, seed);
      }()) {
    family_ = sources_.front().address.family();
    for (const Source& s : sources_) {
        if (s.address.family() != family_) throw std::invalid_argument("sources mix IPv4 and IPv6");
        std::array<std::uint8_t, 16> bytes{};
        if (family_ == AF_INET) {
            std::memcpy(bytes.data(), &reinterpret_cast<const sockaddr_in*>(&s.address.storage)->sin_addr, 4);
        } else {
            std::memcpy(bytes.data(), &reinterpret_cast<const sockaddr_in6*>(&s.address.storage)->sin6_addr, 16);
        }
        addresses_.push_back(bytes);
        first_flow_.push_back(size_);
        size_ += s.port_count();
    }
}

FlowSpace::Endpoint FlowSpace::endpoint(std::uint64_t flow) const {
    const auto it = std::upper_bound(first_flow_.begin(), first_flow_.end(), flow);
    const std::size_t source = static_cast<std::size_t>(it - first_flow_.begin()) - 1;
    std::uint64_t offset = flow - first_flow_[source];
    for (const PortRange& r : sources_[source].ranges) {
        if (offset < r.size()) {
            return Endpoint{addresses_[source].data(), static_cast<std::uint16_t>(r.first + offset), source};
        }
        offset -= r.size();
    }
    return Endpoint{addresses_[source].data(), 0, source};  // unreachable for flow < size()
}

std::size_t FlowSpace::memory_bytes() const {
    std::size_t bytes = sizeof(*this);
    for (const Source& s : sources_) bytes += sizeof(Source) + s.ranges.capacity() * sizeof(PortRange) + s.text.capacity();
    bytes += addresses_.capacity() * sizeof(addresses_.front()) + first_flow_.capacity() * sizeof(std::uint64_t);
    return bytes;
}

bool FlowSpace::flow_of(const std::uint8_t* address, std::uint16_t port, std::uint64_t& flow) const {
    const std::size_t n = family_ == AF_INET ? 4 : 16;
    for (std::size_t s = 0; s < sources_.size(); ++s) {
        if (std::memcmp(addresses_[s].data(), address, n) != 0) continue;
        std::uint64_t offset = 0;
        for (const PortRange& r : sources_[s].ranges) {
            if (port >= r.first && port <= r.last) {
                flow = first_flow_[s] + offset + (port - r.first);
                return true;
            }
            offset += r.size();
        }
    }
    return false;
}

FlowTable::FlowTable(std::uint64_t flows, std::uint64_t slots) : flows_(flows), mask_(slots - 1) {
    if (flows == 0 || slots == 0 || (slots & (slots - 1)) != 0) {
        throw std::invalid_argument("flow table: at least one flow and a power-of-two slot count");
    }
    if (slots > flows * 65536) {
        throw std::invalid_argument("flow table: more queries in flight (" + std::to_string(slots) +
                                    ") than 65536 per flow (" + std::to_string(flows) + " flows)");
    }
    slots_ = std::make_unique<Slot[]>(slots);
}

bool FlowTable::publish(std::uint64_t k, std::int64_t sent_ns, std::int64_t timeout_ns) {
    Slot& slot = slots_[k & mask_];
    const std::uint64_t old = slot.tag.load(std::memory_order_relaxed);
    const bool overrun = static_cast<State>(old & 3u) == State::outstanding &&
                         sent_ns - slot.sent_ns.load(std::memory_order_relaxed) < timeout_ns;
    slot.tag.store((k << 2) | static_cast<std::uint64_t>(State::writing), std::memory_order_relaxed);
    slot.sent_ns.store(sent_ns, std::memory_order_release);
    slot.tag.store((k << 2) | static_cast<std::uint64_t>(State::outstanding), std::memory_order_release);
    std::uint64_t seen = published_.load(std::memory_order_relaxed);
    while (seen < k + 1 && !published_.compare_exchange_weak(seen, k + 1, std::memory_order_release)) {
    }
    return overrun;
}

FlowTable::Lookup FlowTable::View::find(std::uint16_t id, Snapshot& out) const {
    const FlowTable& t = table_;
    const std::uint64_t published = t.published_.load(std::memory_order_acquire);
    if (published <= position_) return Lookup::unknown;
    // The newest sequence of this flow position sent so far, then back to the
    // newest one with this ID.
    const std::uint64_t newest = (published - 1 - position_) / t.flows_;
    const std::uint64_t back = (newest - id) & 0xffffu;
    if (back > newest) return Lookup::unknown;
    const std::uint64_t q = newest - back;
    const std::uint64_t k = position_ + q * t.flows_;
    const Slot& slot = t.slots_[k & t.mask_];
    const std::uint64_t tag = slot.tag.load(std::memory_order_acquire);
    const auto state = static_cast<State>(tag & 3u);
    if ((tag >> 2) != k || (state != State::outstanding && state != State::answered)) return Lookup::unknown;
    out.tag = (q << 2) | (tag & 3u);
    out.query_index = k;
    out.sent_ns = slot.sent_ns.load(std::memory_order_acquire);
    if (slot.tag.load(std::memory_order_relaxed) != tag) return Lookup::unknown;
    return state == State::answered ? Lookup::answered : Lookup::outstanding;
}

bool FlowTable::View::mark_answered(const Snapshot& snapshot) {
    const std::uint64_t k = snapshot.query_index;
    Slot& slot = table_.slots_[k & table_.mask_];
    std::uint64_t expected = (k << 2) | static_cast<std::uint64_t>(State::outstanding);
    return slot.tag.compare_exchange_strong(expected, (k << 2) | static_cast<std::uint64_t>(State::answered),
                                            std::memory_order_acq_rel, std::memory_order_relaxed);
}

}  // namespace xlatperf::xdp
