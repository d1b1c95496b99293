#include "io/io_report.hpp"

namespace xlatperf::io {

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

}  // namespace

nlohmann::json to_json(const IoReport& report) {
    using nlohmann::json;
    if (report.mode != "xdp") return json{{"mode", report.mode}};
    const XdpReport& x = report.xdp;
    return json{
        {"mode", "xdp"},
        {"interface", x.interface},
        {"xdp_mode", x.attach_mode},
        {"zero_copy", x.zero_copy},
        {"queue", x.queue},
        {"queues", x.queues},
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
        {"frames_sent", x.frames_sent},
        {"kicks", x.kicks},
        {"frames_per_kick", x.kicks ? static_cast<double>(x.frames_sent) / static_cast<double>(x.kicks) : 0.0},
        {"tx_ring_waits", x.tx_ring_waits},
        {"xdp_statistics", {{"rx_dropped", x.rx_dropped},
                            {"rx_invalid_descs", x.rx_invalid_descs},
                            {"tx_invalid_descs", x.tx_invalid_descs},
                            {"rx_ring_full", x.rx_ring_full},
                            {"rx_fill_ring_empty", x.rx_fill_ring_empty},
                            {"tx_ring_empty", x.tx_ring_empty}}},
        {"tester_drops", x.own_drops()},
        {"program", {{"redirected", x.redirected}, {"passed", x.passed}, {"filter_keys", x.filter_keys}}},
        {"frame_errors", {{"truncated", x.frame_truncated},
                          {"not_udp", x.frame_not_udp},
                          {"fragment", x.frame_fragment},
                          {"bad_header", x.frame_bad_header},
                          {"bad_checksum", x.frame_bad_checksum},
                          {"not_our_flow", x.frame_not_our_flow}}},
    };
}

}  // namespace xlatperf::io
