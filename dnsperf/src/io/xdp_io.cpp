#include "io/xdp_io.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cstring>
#include <filesystem>
#include <optional>
#include <fstream>
#include <net/if.h>
#include <poll.h>

#include "egress.hpp"
#include "net.hpp"
#include "pacing.hpp"
#include "sources.hpp"
#include "xdp/encap.hpp"
#include "xdp/flows.hpp"
#include "xdp/frame.hpp"
#include "xdp/neighbour.hpp"
#include "xdp/program.hpp"
#include "xdp/xsk.hpp"

namespace xlatperf::io {

using xdp::FlowTable;

std::vector<Source> flow_sources(const Plan& plan) {
    std::vector<Source> out;
    for (const Source& source : plan.sources) {
        if (source.ranges.empty()) {
            throw StartError("--io xdp: source " + source.text + " has no ports (a flow needs an address and a port)");
        }
        Source kept = source;
        kept.ranges = used_ports(source);
        if (!kept.ranges.empty()) out.push_back(std::move(kept));
    }
    return out;
}

std::uint64_t flow_slots(std::uint64_t planned, std::uint64_t flows) {
    std::uint64_t cap = 1;
    while (cap * 2 <= flows * 65536) cap *= 2;
    return std::min(planned, cap);
}

// One interface queue: its AF_XDP socket (UMEM and rings) and its counters, each written by one
// thread (the pair's sender or receiver) and read after the threads ended.
struct XdpLink::Queue {
    std::uint32_t id = 0;
    std::unique_ptr<xdp::XskSocket> xsk;
    xdp::XskStats stats_before;
    // Written by the pair's sender.
    std::uint64_t frames_sent = 0;
    std::uint64_t tx_ring_waits = 0;
    // Written by the pair's receiver.
    std::uint64_t frames_received = 0;     // frames read from the RX ring
    std::uint64_t other_queue_replies = 0; // replies to a flow whose queries another queue sent
    std::uint64_t frame_errors[7] = {};    // FrameStatus 1..5, then not our flow, then (--encap) wrong CE
};

namespace {

xdp::FlowOrder flow_order(const Plan& plan) {
    return plan.flow_pseudorandom ? xdp::FlowOrder::pseudorandom : xdp::FlowOrder::sequential;
}

}  // namespace

struct XdpLink::State {
    State(const Plan& plan_, const QueryTemplate& query_, std::string ifname_, const xdp::NextHop& hop_,
          const std::vector<Source>& sources, const xdp::FrameSpec& spec)
        : plan(plan_),
          query(query_),
          ifname(std::move(ifname_)),
          hop(hop_),
          flows(plan_.encap ? std::nullopt
                            : std::optional<xdp::FlowSpace>(std::in_place, sources, flow_order(plan_), plan_.flow_seed)),
          ces(plan_.encap ? std::optional<xdp::CeSpace>(std::in_place, plan_.encap_rule) : std::nullopt),
          flow_count(flows ? flows->size() : ces->flows()),
          permutation(flow_count, flow_order(plan_), plan_.flow_seed),
          table(flow_count, flow_slots(plan_.xdp_slots, flow_count)),
          frame(query_, spec) {}

    const Plan& plan;
    const QueryTemplate& query;
    std::string ifname;
    xdp::NextHop hop;
    std::optional<xdp::FlowSpace> flows;  // the --source flows, or
    std::optional<xdp::CeSpace> ces;      // --encap: the simulated CEs' (computed from the flow number)
    std::uint64_t flow_count;
    xdp::FlowPermutation permutation;     // position in a round <-> flow (the same as FlowSpace's own)
    FlowTable table;                   // one for every queue: any receiver may match any reply
    xdp::FrameTemplate frame;          // read only once the threads run
    std::uint32_t interface_queues = 0;  // the interface's receive queues
    std::unique_ptr<xdp::XdpProgram> program;  // before the sockets: it goes after them
    std::vector<std::unique_ptr<Queue>> queues;  // pair i's is queues[i]
    xdp::FilterStats filter_before;
    std::vector<const ReceiverStats*> receivers;  // each receiver's statistics (its case bitmap's bytes)
};

namespace {

// An 802.1Q device's lower device and VLAN ID, from /proc/net/vlan/config ("NAME | VID | DEVICE"
// lines); false when `device` is none (or the kernel has no 802.1Q devices).
bool vlan_device(const std::string& device, std::string& lower, unsigned& id) {
    std::ifstream config("/proc/net/vlan/config");
    std::string line;
    const auto trim = [](std::string text) {
        const auto first = text.find_first_not_of(" \t");
        const auto last = text.find_last_not_of(" \t");
        return first == std::string::npos ? std::string() : text.substr(first, last - first + 1);
    };
    while (std::getline(config, line)) {
        const auto bar = line.find('|');
        const auto bar2 = bar == std::string::npos ? bar : line.find('|', bar + 1);
        if (bar2 == std::string::npos || trim(line.substr(0, bar)) != device) continue;
        const std::string vid = trim(line.substr(bar + 1, bar2 - bar - 1));
        if (vid.empty() || vid.find_first_not_of("0123456789") != std::string::npos || vid.size() > 4) return false;
        id = static_cast<unsigned>(std::stoul(vid));
        lower = trim(line.substr(bar2 + 1));
        return true;
    }
    return false;
}

std::string device_name(int index) {
    char name[IF_NAMESIZE] = {};
    if (index <= 0 || if_indextoname(static_cast<unsigned>(index), name) == nullptr) return {};
    return name;
}

// Where the next hop is resolved: the interface, or with --vlan the VLAN device over it that the route
// to the server leaves by (where the kernel keeps the neighbour entry). On a kernel without 802.1Q
// devices the route leaves by the interface itself.
// Where the frames go: the server, or with --encap the BR.
const SockAddr& frame_target(const Plan& plan) { return plan.encap ? plan.encap_br : plan.server; }

std::string hop_interface(const Plan& plan, const std::string& ifname) {
    if (plan.config.vlan == 0) return ifname;
    const std::vector<int> devices = egress_devices(frame_target(plan), {SockAddr{}});
    const std::string routed = device_name(devices.empty() ? 0 : devices.front());
    if (routed.empty() || routed == ifname) return ifname;
    std::string lower;
    unsigned id = 0;
    if (vlan_device(routed, lower, id) && lower == ifname && id == plan.config.vlan) return routed;
    throw StartError("--io xdp --vlan " + std::to_string(plan.config.vlan) + ": the route to the server leaves by " +
                     routed + ", which is not VLAN " + std::to_string(plan.config.vlan) + " over " + ifname);
}

std::string interface_for(const Plan& plan) {
    if (!plan.config.xdp_interface.empty()) return plan.config.xdp_interface;
    std::vector<SockAddr> sources;
    if (!plan.encap) {
        for (const Source& s : plan.sources) sources.push_back(s.address);
    }
    std::vector<int> devices = sources.empty() ? std::vector<int>{} : egress_devices(frame_target(plan), sources);
    // Flow addresses need not be the host's (the server routes them back through it): then
    // the route to the server from any address says.
    if (devices.empty()) devices = egress_devices(frame_target(plan), {SockAddr{}});
    if (devices.size() != 1) {
        throw StartError("--io xdp: the route to the server leaves by " + std::to_string(devices.size()) +
                         " interfaces; name one with --xdp-interface");
    }
    const std::string name = device_name(devices.front());
    if (name.empty()) throw StartError("--io xdp: cannot name the interface the route to the server leaves by");
    // With --vlan the route leaves by the VLAN device; the frames go out of the device under it.
    std::string lower;
    unsigned id = 0;
    if (plan.config.vlan != 0 && vlan_device(name, lower, id)) return lower;
    return name;
}

xdp::AttachMode attach_mode(const std::string& text) {
    if (text == "native") return xdp::AttachMode::native;
    if (text == "generic") return xdp::AttachMode::generic;
    return xdp::AttachMode::automatic;
}

xdp::FrameSpec frame_spec(const std::string& ifname, const xdp::NextHop& hop, const Plan& plan) {
    xdp::FrameSpec spec;
    spec.source_mac = xdp::interface_mac(ifname);
    spec.destination_mac = hop.mac;
    spec.server = plan.server;
    spec.vlan = static_cast<std::uint16_t>(plan.config.vlan);
    spec.encapsulate = plan.encap;
    spec.outer_destination = plan.encap_rule.br;
    return spec;
}

class XdpSend final : public SendIo {
public:
    XdpSend(XdpLink::State& state, XdpLink::Queue& queue)
        : state_(state), queue_(queue), batch_(state.plan.config.batch), poll_{queue.xsk->fd(), POLLOUT, 0} {}

    std::uint64_t round_limit() const override { return batch_; }

    void send(std::uint64_t j, std::uint64_t count, SendContext& context) override {
        xdp::XskSocket& xsk = *queue_.xsk;
        SenderStats& stats = context.stats();
        const std::int64_t start = context.start_ns();
        const Plan& plan = state_.plan;
        std::uint64_t done = 0;
        std::int64_t blocked_since = -1;
        while (done < count) {
            const std::int64_t before = monotonic_ns() - start;
            const auto wanted = static_cast<std::uint32_t>(std::min<std::uint64_t>(batch_, count - done));
            const std::uint32_t n = xsk.tx_reserve(wanted);
            if (n == 0) {
                // Every TX frame is in flight: wait for completions, as a socket waits for room.
                ++stats.would_block;
                ++queue_.tx_ring_waits;
                if (blocked_since < 0) blocked_since = before;
                if (context.stop_now()) break;
                poll(&poll_, 1, 1);
                continue;
            }
            if (blocked_since >= 0) {
                stats.max_retry_stall_ns = std::max(stats.max_retry_stall_ns, before - blocked_since);
                blocked_since = -1;
            }
            const std::int64_t sent_at = monotonic_ns();
            for (std::uint32_t i = 0; i < n; ++i) {
                const std::uint64_t k = context.query_index(j + done + i);
                const std::uint64_t flow = state_.permutation.forward(state_.table.position(k));
                const std::uint64_t sequence = state_.table.sequence(k);
                if (state_.ces) {
                    const auto ce = state_.ces->endpoint(flow);
                    state_.frame.write(xsk.tx_slot(i), ce.ipv4.data(), ce.port, FlowTable::id_of(sequence),
                                       plan.subnet.address(k), sequence >> 16, ce.ipv6.data());
                } else {
                    const auto endpoint = state_.flows->endpoint(flow);
                    state_.frame.write(xsk.tx_slot(i), endpoint.address, endpoint.port, FlowTable::id_of(sequence),
                                       plan.subnet.address(k), sequence >> 16);
                }
                if (state_.table.publish(k, sent_at, plan.timeout_ns)) ++stats.ring_overruns;
            }
            xsk.tx_submit(n, static_cast<std::uint32_t>(state_.frame.size()));
            xsk.kick();
            ++stats.syscalls;
            queue_.frames_sent += n;
            context.sent(j + done, n, before, monotonic_ns() - start, sent_at);
            done += n;
        }
        stats.unsent += count - done;
    }

private:
    XdpLink::State& state_;
    XdpLink::Queue& queue_;
    std::uint32_t batch_;
    pollfd poll_;
};

constexpr unsigned kDrainCalls = 64;  // most RX ring reads between end-time checks

class XdpReceive final : public ReceiveIo {
public:
    XdpReceive(XdpLink::State& state, unsigned pair, ReceiverStats& stats)
        : state_(state),
          queue_(*state.queues[pair]),
          pair_(pair),
          stats_(stats),
          classifier_(state.query, state.plan.subnet, state.plan.server, state.plan.timeout_ns),
          frames_(state.plan.config.batch),
          poll_{queue_.xsk->fd(), POLLIN, 0} {}

    std::size_t drain(ReplySink& sink) override {
        xdp::XskSocket& xsk = *queue_.xsk;
        const auto batch = static_cast<std::uint32_t>(frames_.size());
        std::size_t total = 0;
        for (unsigned call = 0; call < kDrainCalls; ++call) {
            const std::uint32_t got = xsk.receive(frames_.data(), batch);
            ++stats_.syscalls;
            if (got == 0) break;
            // No kernel stamp: the frames of one read share the time they were read.
            const std::int64_t now = monotonic_ns();
            for (std::uint32_t i = 0; i < got; ++i) handle(frames_[i], now, sink);
            xsk.release_rx(got);
            queue_.frames_received += got;
            total += got;
            if (got < batch) break;
        }
        return total;
    }

    void wait(std::int64_t timeout_ns) override {
        poll(&poll_, 1, static_cast<int>(std::max<std::int64_t>(timeout_ns, 0) / 1'000'000 + 1));
    }

    bool pending() override {
        pollfd p = poll_;
        return poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
    }

private:
    void handle(const xdp::RxFrame& frame, std::int64_t received_ns, ReplySink& sink) {
        xdp::ParsedReply reply;
        const xdp::FrameStatus status = state_.ces ? xdp::parse_encapsulated_reply(frame.data, frame.length, reply)
                                                   : xdp::parse_reply(frame.data, frame.length, reply);
        if (status != xdp::FrameStatus::ok) {
            ++queue_.frame_errors[static_cast<int>(status) - 1];
            return;
        }
        std::uint64_t flow = 0;
        if (state_.ces) {
            // The inner destination names the CE; the BR must have sent the reply from its own address to
            // that CE's (a reply encapsulated to another CE is invalid: never matched, counted on its own).
            xdp::Ipv6 ce_address{};
            if (!state_.ces->flow_of(reply.destination, reply.destination_port, flow, ce_address) ||
                std::memcmp(reply.outer_source, state_.ces->rule().br.data(), 16) != 0) {
                ++queue_.frame_errors[5];
                return;
            }
            if (std::memcmp(reply.outer_destination, ce_address.data(), 16) != 0) {
                ++queue_.frame_errors[6];
                return;
            }
        } else if (!state_.flows->flow_of(reply.destination, reply.destination_port, flow)) {
            ++queue_.frame_errors[5];
            return;
        }
        const std::uint64_t position = state_.permutation.inverse(flow);
        // Query k goes to position k mod F and is pair (k mod T)'s; F = T x K, so the position says
        // which pair (queue) sent this flow's queries.
        if (position % state_.queues.size() != pair_) ++queue_.other_queue_replies;
        auto view = state_.table.view(position);
        const Outcome outcome = classifier_.classify(view, reply.message, reply.length, false, reply.source.get(),
                                                     reply.source.length, received_ns);
        sink.reply(outcome, received_ns, static_cast<std::size_t>(position));
    }

    XdpLink::State& state_;
    XdpLink::Queue& queue_;
    unsigned pair_;
    ReceiverStats& stats_;
    ReplyClassifier classifier_;
    std::vector<xdp::RxFrame> frames_;
    pollfd poll_;
};

}  // namespace

namespace {

// The interface's receive queues (sysfs queues/rx-N), 0 when they cannot be read.
std::uint32_t receive_queues(const std::string& ifname) {
    std::error_code error;
    std::uint32_t count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net/" + ifname + "/queues", error)) {
        if (entry.path().filename().string().rfind("rx-", 0) == 0) ++count;
    }
    return error ? 0 : count;
}

}  // namespace

XdpLink::XdpLink(const Plan& plan, const QueryTemplate& query) {
    const std::string ifname = interface_for(plan);
    const std::vector<Source> sources = plan.encap ? std::vector<Source>{} : flow_sources(plan);
    try {
        const std::string hop_if = hop_interface(plan, ifname);
        const xdp::NextHop hop = xdp::resolve_next_hop(hop_if, frame_target(plan));
        state_ = std::make_unique<State>(plan, query, ifname, hop, sources, frame_spec(hop_if, hop, plan));
        // Pair i's flows are the positions i, i + T, ...: F = T x K, so each flow is one pair's.
        if (state_->flow_count % plan.xdp_queues.size() != 0) {
            throw StartError("--io xdp: " + std::to_string(state_->flow_count) + " flows do not divide over " +
                             std::to_string(plan.xdp_queues.size()) + " thread pairs");
        }
        state_->interface_queues = receive_queues(ifname);
        for (const std::uint32_t queue : plan.xdp_queues) {
            if (state_->interface_queues != 0 && queue >= state_->interface_queues) {
                throw StartError("--io xdp: " + ifname + " has " + std::to_string(state_->interface_queues) +
                                 " receive queues (0.." + std::to_string(state_->interface_queues - 1) +
                                 "), no queue " + std::to_string(queue) +
                                 ": use fewer --threads or other --xdp-queues, or give the interface more queues "
                                 "(ethtool -L " + ifname + " combined N)");
            }
        }
        const xdp::XskSizes sizes{2048, plan.config.xdp_frames, plan.config.xdp_frames,
                                  std::max<std::uint32_t>(plan.config.xdp_frames / 2, 64)};
        xdp::FilterSpec filter{plan.server, sources, static_cast<std::uint16_t>(plan.config.vlan)};
        if (state_->ces) {
            filter.encap = true;
            filter.outer_server = plan.encap_rule.br;
            filter.first_ipv4 = state_->ces->first_ipv4();
            filter.last_ipv4 = state_->ces->last_ipv4();
        }
        state_->program = std::make_unique<xdp::XdpProgram>(ifname, filter, attach_mode(plan.config.xdp_mode));
        for (const std::uint32_t id : plan.xdp_queues) {
            auto queue = std::make_unique<Queue>();
            queue->id = id;
            queue->xsk = std::make_unique<xdp::XskSocket>(ifname, id, sizes);
            state_->program->bind_queue(id, queue->xsk->fd());
            for (std::uint32_t i = 0; i < queue->xsk->tx_frame_count(); ++i) {
                state_->frame.write_template(queue->xsk->tx_frame(i));
            }
            queue->stats_before = queue->xsk->stats();
            state_->queues.push_back(std::move(queue));
        }
        state_->filter_before = state_->program->stats();
    } catch (const xdp::XdpError& e) {
        throw StartError(std::string("--io xdp: ") + e.what());
    } catch (const std::invalid_argument& e) {
        throw StartError(std::string("--io xdp: ") + e.what());
    }
}

// The sockets close before the program goes (members in reverse order).
XdpLink::~XdpLink() = default;

std::unique_ptr<SendIo> XdpLink::sender(unsigned pair, SenderStats& /*stats: the sender's context gives them*/) {
    return std::make_unique<XdpSend>(*state_, *state_->queues.at(pair));
}

std::unique_ptr<ReceiveIo> XdpLink::receiver(unsigned pair, ReceiverStats& stats) {
    state_->receivers.push_back(&stats);
    return std::make_unique<XdpReceive>(*state_, pair, stats);
}

std::uint64_t XdpLink::channels(unsigned /*pair: every pair's are all the flows*/) const {
    return state_->flow_count;
}

Flow XdpLink::channel(unsigned /*pair*/, std::uint64_t position) const {
    const State& s = *state_;
    const std::uint64_t flow = s.permutation.forward(position % s.flow_count);
    if (s.ces) {
        const xdp::CeSpace::Endpoint e = s.ces->endpoint(flow);
        char text[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, e.ipv4.data(), text, sizeof text);
        return Flow{text, e.port};
    }
    const xdp::FlowSpace::Endpoint e = s.flows->endpoint(flow);
    return Flow{s.flows->source_text(e.source), e.port};
}

// No ports: the flows are counted in io.flows.
void XdpLink::describe(unsigned /*pair*/, PairResult& /*result*/) const {}

std::vector<int> XdpLink::egress_devices() const { return {state_->program->ifindex()}; }

IoReport XdpLink::finish(const UdpErrorCounters& namespace_udp) {
    const State& s = *state_;
    IoReport report;
    report.mode = "xdp";
    report.gso.reason = "not used (--io xdp: no UDP sockets)";
    XdpReport& r = report.xdp;
    r.interface = s.ifname;
    r.attach_mode = s.program->mode_name();
    r.zero_copy = s.queues.front()->xsk->zero_copy();
    r.queue = s.queues.front()->id;
    r.queues = static_cast<std::uint32_t>(s.queues.size());
    r.interface_queues = s.interface_queues;
    r.prog_id = s.program->prog_id();
    r.stale_program_removed = s.program->stale_removed();
    r.next_hop_mac = xdp::mac_text(s.hop.mac);
    r.vlan = s.plan.config.vlan;
    r.next_hop_probed = s.hop.probed;
    const xdp::XskSizes& sizes = s.queues.front()->xsk->sizes();
    r.frame_size = sizes.frame_size;
    r.rx_frames = sizes.rx_frames;
    r.tx_frames = sizes.tx_frames;
    r.ring_size = sizes.ring;
    r.query_frame_bytes = s.frame.size();
    r.flows = s.flow_count;
    r.flow_order = s.plan.flow_pseudorandom ? "pseudorandom" : "sequential";
    r.flow_seed = s.plan.flow_seed;
    r.in_flight = s.plan.xdp_in_flight;
    r.slots = s.table.slots();
    r.slot_bytes = xdp::kFlowSlotBytes;
    r.flow_space_bytes = s.flows ? s.flows->memory_bytes() : sizeof(xdp::CeSpace);
    if (s.ces) {
        const xdp::EncapRule& rule = s.ces->rule();
        r.encap.mode = rule.kind == xdp::EncapKind::map_e ? "map-e" : "lw4o6";
        r.encap.rule = xdp::rule_text(rule);
        r.encap.br = xdp::ipv6_text(rule.br);
        r.encap.ces = rule.ces;
        r.encap.ports_per_ce = rule.ports_per_ce;
        r.encap.psid_length = rule.psid_length;
        r.encap.psid_offset = rule.psid_offset;
        r.encap.table_bytes = sizeof(xdp::CeSpace);
    }
    for (const ReceiverStats* receiver : s.receivers) r.case_bitmap_bytes += receiver->case_bitmap_bytes;
    const auto delta = [](std::uint64_t after, std::uint64_t before) { return after - std::min(after, before); };
    // Per queue, and the sums the single-queue fields always gave.
    for (const auto& queue : s.queues) {
        XdpQueueReport q;
        q.queue = queue->id;
        XdpSocketCounters& c = q.counters;
        c.frames_sent = queue->frames_sent;
        c.kicks = queue->xsk->kicks();
        c.tx_ring_waits = queue->tx_ring_waits;
        c.frames_received = queue->frames_received;
        c.other_queue_replies = queue->other_queue_replies;
        const xdp::XskStats now = queue->xsk->stats();
        c.rx_dropped = delta(now.rx_dropped, queue->stats_before.rx_dropped);
        c.rx_invalid_descs = delta(now.rx_invalid_descs, queue->stats_before.rx_invalid_descs);
        c.tx_invalid_descs = delta(now.tx_invalid_descs, queue->stats_before.tx_invalid_descs);
        c.rx_ring_full = delta(now.rx_ring_full, queue->stats_before.rx_ring_full);
        c.rx_fill_ring_empty = delta(now.rx_fill_ring_empty, queue->stats_before.rx_fill_ring_empty);
        c.tx_ring_empty = delta(now.tx_ring_empty, queue->stats_before.tx_ring_empty);
        r.totals += c;
        r.frame_truncated += queue->frame_errors[0];
        r.frame_not_udp += queue->frame_errors[1];
        r.frame_fragment += queue->frame_errors[2];
        r.frame_bad_header += queue->frame_errors[3];
        r.frame_bad_checksum += queue->frame_errors[4];
        r.frame_not_our_flow += queue->frame_errors[5];
        r.encap.wrong_ce += queue->frame_errors[6];
        r.per_queue.push_back(q);
    }
    const xdp::FilterStats filter = s.program->stats();
    r.redirected = delta(filter.redirected, s.filter_before.redirected);
    r.passed = delta(filter.passed, s.filter_before.passed);
    r.unbound = delta(filter.unbound, s.filter_before.unbound);
    r.filter_keys = s.program->filter_keys();
    // The sockets' own drops are the tester's, as a socket's receive-buffer drops are; a frame with a bad
    // UDP checksum is the DUT's, as the kernel's InCsumErrors are at a socket; a reply on a queue without a
    // socket went to the kernel and is the tester's loss.
    IoCounters& counters = report.counters;
    counters.tester_drops = r.totals.own_drops();
    counters.checksum_errors = namespace_udp.checksum_errors + r.frame_bad_checksum;
    counters.unbound_queue_replies = r.unbound;
    return report;
}

}  // namespace xlatperf::io
