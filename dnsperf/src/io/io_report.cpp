#include "io/io_report.hpp"

namespace xlatperf::io {

XdpSocketCounters& XdpSocketCounters::operator+=(const XdpSocketCounters& other) {
    frames_sent += other.frames_sent;
    kicks += other.kicks;
    tx_ring_waits += other.tx_ring_waits;
    frames_received += other.frames_received;
    other_queue_replies += other.other_queue_replies;
    rx_dropped += other.rx_dropped;
    rx_invalid_descs += other.rx_invalid_descs;
    tx_invalid_descs += other.tx_invalid_descs;
    rx_ring_full += other.rx_ring_full;
    rx_fill_ring_empty += other.rx_fill_ring_empty;
    tx_ring_empty += other.tx_ring_empty;
    return *this;
}

namespace {

// The matching state's memory: the in-flight slots (bytes per query in flight) and the fixed part,
// which does not grow with the flows.
nlohmann::json matching_json(const XdpReport& x) {
    const std::uint64_t bytes = x.slots * x.slot_bytes;
    const std::uint64_t fixed = x.flow_space_bytes + x.case_bitmap_bytes;
    return {
        {"flows", x.flows},
        {"in_flight_queries", x.in_flight},
        {"slots", x.slots},
        {"bytes_per_slot", x.slot_bytes},
        {"bytes", bytes},
        {"bytes_per_in_flight_query",
         x.in_flight ? nlohmann::json(static_cast<double>(bytes) / static_cast<double>(x.in_flight))
                     : nlohmann::json(nullptr)},
        {"fixed_bytes", fixed},
        {"fixed", {{"flow_space_bytes", x.flow_space_bytes}, {"case_bitmap_bytes", x.case_bitmap_bytes}}},
        {"total_bytes", bytes + fixed},
    };
}

// One socket's counters (per queue, or summed over the queues): what its threads counted, its
// XDP_STATISTICS and the tester's own drops among them.
nlohmann::json counters_json(const XdpSocketCounters& c) {
    return {
        {"frames_sent", c.frames_sent},
        {"kicks", c.kicks},
        {"tx_ring_waits", c.tx_ring_waits},
        {"frames_received", c.frames_received},
        {"other_queue_replies", c.other_queue_replies},
        {"xdp_statistics", {{"rx_dropped", c.rx_dropped},
                            {"rx_invalid_descs", c.rx_invalid_descs},
                            {"tx_invalid_descs", c.tx_invalid_descs},
                            {"rx_ring_full", c.rx_ring_full},
                            {"rx_fill_ring_empty", c.rx_fill_ring_empty},
                            {"tx_ring_empty", c.tx_ring_empty}}},
        {"tester_drops", c.own_drops()},
    };
}

// Each queue's socket: what its sender sent, what arrived on it (replies go to the queue the other
// side's hash picks, so not necessarily the one their queries left by) and its XDP_STATISTICS.
nlohmann::json queues_json(const XdpReport& x) {
    nlohmann::json out = nlohmann::json::array();
    for (const XdpQueueReport& q : x.per_queue) {
        nlohmann::json one = counters_json(q.counters);
        one["queue"] = q.queue;
        out.push_back(std::move(one));
    }
    return out;
}

// The counters every backend reports in one shape.
nlohmann::json io_counters_json(const IoCounters& c) {
    return {{"tester_drops", c.tester_drops},
            {"checksum_errors", c.checksum_errors},
            {"unbound_queue_replies", c.unbound_queue_replies}};
}

}  // namespace

nlohmann::json to_json(const IoReport& report) {
    using nlohmann::json;
    if (report.mode != "xdp") {
        json out{{"mode", report.mode}};
        out.update(io_counters_json(report.counters));
        return out;
    }
    const XdpReport& x = report.xdp;
    const XdpSocketCounters& sums = x.totals;
    json out{
        {"mode", "xdp"},
        {"interface", x.interface},
        {"xdp_mode", x.attach_mode},
        {"zero_copy", x.zero_copy},
        {"queue", x.queue},
        {"queues", x.queues},
        {"interface_queues", x.interface_queues},
        {"per_queue", queues_json(x)},
        {"prog_id", x.prog_id},
        {"stale_program_removed", x.stale_program_removed},
        {"next_hop", {{"mac", x.next_hop_mac}, {"probed", x.next_hop_probed}}},
        {"vlan", x.vlan},
        {"rings", {{"frame_bytes", x.frame_size}, {"rx_frames", x.rx_frames}, {"tx_frames", x.tx_frames},
                   {"ring_entries", x.ring_size}}},
        {"query_frame_bytes", x.query_frame_bytes},
        {"flows", x.flows},
        {"flow_order", {{"order", x.flow_order}, {"seed", x.flow_seed}}},
        {"matching", matching_json(x)},
        {"frames_per_kick", sums.kicks ? static_cast<double>(sums.frames_sent) / static_cast<double>(sums.kicks) : 0.0},
        {"program", {{"redirected", x.redirected}, {"passed", x.passed}, {"unbound", x.unbound},
                     {"filter_keys", x.filter_keys}}},
        {"frame_errors", {{"truncated", x.frame_truncated},
                          {"not_udp", x.frame_not_udp},
                          {"fragment", x.frame_fragment},
                          {"bad_header", x.frame_bad_header},
                          {"bad_checksum", x.frame_bad_checksum},
                          {"not_our_flow", x.frame_not_our_flow}}},
    };
    if (!x.encap.mode.empty()) {
        const EncapReport& e = x.encap;
        out["frame_errors"]["wrong_ce"] = e.wrong_ce;
        out["encap"] = {{"mode", e.mode},           {"rule", e.rule},
                        {"br", e.br},               {"ces", e.ces},
                        {"ports_per_ce", e.ports_per_ce}, {"psid_length", e.psid_length},
                        {"psid_offset", e.psid_offset},   {"table_bytes", e.table_bytes},
                        {"wrong_ce", e.wrong_ce}};
    }
    out.update(counters_json(sums));
    out.update(io_counters_json(report.counters));  // the tester's drops: the sockets' own, as summed above
    return out;
}

}  // namespace xlatperf::io
