// xdp_probe: proves the AF_XDP layer (src/xdp/) end to end before it goes into
// xlatperf. It sends N queries at a fixed rate through one AF_XDP socket on
// one interface queue, over flows without sockets, matches the replies the
// kernel program hands it with xlatperf's reply classifier, and prints one
// JSON object: what it sent, every bucket, the frame parser's and the
// kernel's counters, its CPU time. One thread sends and receives.
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <sys/resource.h>

#include "options.hpp"
#include "pacing.hpp"
#include "query.hpp"
#include "reply.hpp"
#include "sources.hpp"
#include "xdp/flows.hpp"
#include "xdp/frame.hpp"
#include "xdp/neighbour.hpp"
#include "xdp/program.hpp"
#include "xdp/xsk.hpp"

using namespace xlatperf;
using namespace xlatperf::xdp;

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Options {
    std::string interface;
    std::string server;
    std::uint16_t port = 53;
    std::vector<std::string> sources;
    double rate_qps = 1000;
    std::uint64_t queries = 1000;
    double timeout_s = 0.25;
    double wait_s = -1;  // after the last send; <0: timeout + 0.25 s
    std::string order = "sequential";
    std::uint64_t seed = 1;
    std::uint32_t queue = 0;
    std::string mode = "auto";
    std::string domain = "dns64perf.test";
    std::string qtype = "AAAA";
    std::string subnet = "10.0.0.0/16";
    unsigned batch = 64;
    int cpu = -1;
};

SockAddr parse_server(const std::string& text, std::uint16_t port) {
    SockAddr out;
    auto* sin = reinterpret_cast<sockaddr_in*>(&out.storage);
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    if (inet_pton(AF_INET, text.c_str(), &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        out.length = sizeof(sockaddr_in);
    } else if (inet_pton(AF_INET6, text.c_str(), &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        out.length = sizeof(sockaddr_in6);
    } else {
        throw OptionError("bad --server '" + text + "': not an IPv4 or IPv6 address");
    }
    return out;
}

std::uint64_t next_power_of_two(std::uint64_t v) {
    std::uint64_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

const char* kind_name(ReplyKind kind) {
    switch (kind) {
        case ReplyKind::valid: return "valid";
        case ReplyKind::late: return "late";
        case ReplyKind::rcode: return "rcode";
        case ReplyKind::nodata: return "nodata";
        case ReplyKind::truncated: return "truncated";
        case ReplyKind::malformed: return "malformed";
        case ReplyKind::unexpected: return "unexpected";
        case ReplyKind::duplicate: return "duplicate";
    }
    return "?";
}

int run(const Options& o) {
    if (o.rate_qps <= 0 || !std::isfinite(o.rate_qps)) throw OptionError("--rate must be a positive number of queries/s");
    if (o.queries == 0) throw OptionError("--queries must be at least 1");
    if (o.sources.empty()) throw OptionError("--source ADDR,FIRST-LAST is required (flows need explicit ports)");
    if (o.order != "sequential" && o.order != "random") throw OptionError("--order must be sequential or random");
    if (o.batch == 0 || o.batch > 1024) throw OptionError("--batch must be 1..1024");
    const AttachMode mode = o.mode == "native" ? AttachMode::native
                            : o.mode == "generic" ? AttachMode::generic
                            : o.mode == "auto" ? AttachMode::automatic
                                               : throw OptionError("--mode must be auto, native or generic");
    if (o.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(o.cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) throw OptionError("cannot pin to CPU " + std::to_string(o.cpu));
    }

    const SockAddr server = parse_server(o.server, o.port);
    std::vector<Source> sources;
    for (const std::string& text : o.sources) {
        Source s = parse_source(text);
        if (s.address.family() != server.family()) throw OptionError("--source " + text + ": not the server's family");
        sources.push_back(std::move(s));
    }
    const QueryTemplate query(o.domain, parse_qtype(o.qtype));
    const Subnet subnet = parse_subnet(o.subnet);
    const std::int64_t timeout_ns = static_cast<std::int64_t>(o.timeout_s * 1e9);
    const FlowSpace flows(sources, o.order == "random" ? FlowOrder::pseudorandom : FlowOrder::sequential, o.seed);
    const std::uint64_t in_flight = static_cast<std::uint64_t>(std::ceil(o.rate_qps * o.timeout_s * 2)) + o.batch;
    // Slots: a power of two >= the queries in flight, but at most 65536 per flow.
    std::uint64_t cap = 1;
    while (cap * 2 <= flows.size() * 65536) cap *= 2;
    if (in_flight > cap) throw OptionError("too few flows for the queries in flight: add ports or lower --rate");
    FlowTable table(flows.size(), std::min(cap, next_power_of_two(std::max<std::uint64_t>(in_flight, 1024))));

    const NextHop hop = resolve_next_hop(o.interface, server);
    FrameSpec spec;
    spec.source_mac = interface_mac(o.interface);
    spec.destination_mac = hop.mac;
    spec.server = server;
    const FrameTemplate frame(query, spec);

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    XdpProgram program(o.interface, FilterSpec{server, sources}, mode);
    XskSocket xsk(o.interface, o.queue, XskSizes{});
    program.bind_queue(o.queue, xsk.fd());
    for (std::uint32_t i = 0; i < xsk.tx_frame_count(); ++i) frame.write_template(xsk.tx_frame(i));
    std::cerr << "xdp_probe: attached " << program.mode_name() << " XDP program id " << program.prog_id() << " to "
              << o.interface << std::endl;

    const ReplyClassifier classifier(query, subnet, server, timeout_ns);
    std::map<std::string, std::uint64_t> buckets{{"valid", 0},     {"late", 0},       {"rcode", 0},
                                                 {"nodata", 0},    {"truncated", 0},  {"malformed", 0},
                                                 {"unexpected", 0}, {"duplicate", 0}};
    std::map<std::string, std::uint64_t> frame_errors{{"truncated", 0}, {"not_udp", 0}, {"fragment", 0},
                                                      {"bad_header", 0}, {"bad_checksum", 0}, {"not_our_flow", 0}};
    std::uint64_t overruns = 0, tx_full = 0, wrong_source = 0;
    std::int64_t max_lag_ns = 0;
    double latency_sum_ns = 0;
    const double ns_per_query = 1e9 / o.rate_qps;
    const double cpu_start = cpu_seconds();
    const std::int64_t start = monotonic_ns() + 10'000'000;
    const std::int64_t wait_ns = static_cast<std::int64_t>((o.wait_s < 0 ? o.timeout_s + 0.25 : o.wait_s) * 1e9);
    std::int64_t last_send = start;
    std::uint64_t k = 0;
    std::vector<RxFrame> received(o.batch);
    while (!g_stop) {
        const std::int64_t now = monotonic_ns();
        const std::uint64_t due =
            now < start ? 0
                        : std::min<std::uint64_t>(o.queries, static_cast<std::uint64_t>(
                                                                 static_cast<double>(now - start) / ns_per_query) + 1);
        while (k < due) {
            const std::uint32_t n = xsk.tx_reserve(static_cast<std::uint32_t>(std::min<std::uint64_t>(o.batch, due - k)));
            if (n == 0) {
                ++tx_full;
                break;
            }
            const std::int64_t sent_ns = realtime_ns();
            for (std::uint32_t i = 0; i < n; ++i) {
                const std::uint64_t q = k + i;
                const auto endpoint = flows.endpoint(flows.permutation().forward(table.position(q)));
                const std::uint64_t sequence = table.sequence(q);
                frame.write(xsk.tx_slot(i), endpoint.address, endpoint.port, FlowTable::id_of(sequence),
                            subnet.address(q), sequence >> 16);
                overruns += table.publish(q, sent_ns, timeout_ns) ? 1 : 0;
            }
            xsk.tx_submit(n, static_cast<std::uint32_t>(frame.size()));
            xsk.kick();
            const std::int64_t scheduled = start + static_cast<std::int64_t>(static_cast<double>(k) * ns_per_query);
            max_lag_ns = std::max(max_lag_ns, monotonic_ns() - scheduled);
            k += n;
            last_send = monotonic_ns();
        }
        const std::uint32_t got = xsk.receive(received.data(), o.batch);
        if (got > 0) {
            const std::int64_t received_ns = realtime_ns();
            for (std::uint32_t i = 0; i < got; ++i) {
                ParsedReply reply;
                const FrameStatus status = parse_reply(received[i].data, received[i].length, reply);
                if (status != FrameStatus::ok) {
                    ++frame_errors[to_string(status)];
                    continue;
                }
                std::uint64_t flow = 0;
                if (!flows.flow_of(reply.destination, reply.destination_port, flow)) {
                    ++frame_errors["not_our_flow"];
                    continue;
                }
                auto view = table.view(flows.permutation().inverse(flow));
                const Outcome outcome = classifier.classify(view, reply.message, reply.length, false,
                                                            reply.source.get(), reply.source.length, received_ns);
                ++buckets[kind_name(outcome.kind)];
                if (outcome.cause == UnexpectedCause::wrong_source) ++wrong_source;
                if (outcome.kind == ReplyKind::valid) latency_sum_ns += static_cast<double>(outcome.latency_ns);
            }
            xsk.release_rx(got);
        }
        if (k >= o.queries) {
            if (monotonic_ns() - last_send > wait_ns) break;
        } else if (k < due && monotonic_ns() - last_send > 5'000'000'000) {
            throw XdpError("sending stalled for 5 s (" + std::to_string(k) + " of " + std::to_string(o.queries) +
                           " queries sent): the TX ring does not drain");
        }
        if (got == 0 && k >= due) {
            const std::int64_t next = k >= o.queries ? monotonic_ns() + 200'000
                                                      : start + static_cast<std::int64_t>(static_cast<double>(k) * ns_per_query);
            const std::int64_t pause = std::min<std::int64_t>(next - monotonic_ns(), 200'000);
            if (pause > 0) {
                const timespec ts{0, static_cast<long>(pause)};
                nanosleep(&ts, nullptr);
            }
        }
    }
    const double cpu_s = cpu_seconds() - cpu_start;
    const double wall_s = static_cast<double>(monotonic_ns() - start) / 1e9;
    const XskStats ks = xsk.stats();
    const FilterStats fs = program.stats();
    nlohmann::json out;
    out["interface"] = o.interface;
    out["server"] = o.server + ":" + std::to_string(o.port);
    out["xdp_mode"] = program.mode_name();
    out["zero_copy"] = xsk.zero_copy();
    out["stale_program_removed"] = program.stale_removed();
    out["interrupted"] = g_stop != 0;
    out["next_hop"] = {{"mac", mac_text(hop.mac)}, {"probed", hop.probed}, {"on_link", hop.on_link}};
    out["flows"] = flows.size();
    out["order"] = o.order;
    out["rate_qps"] = o.rate_qps;
    out["queries"] = o.queries;
    out["sent"] = k;
    out["buckets"] = buckets;
    out["unexpected_wrong_source"] = wrong_source;
    out["frame_errors"] = frame_errors;
    out["mean_latency_ms"] = buckets["valid"] ? latency_sum_ns / static_cast<double>(buckets["valid"]) / 1e6 : 0.0;
    out["max_lag_ms"] = static_cast<double>(max_lag_ns) / 1e6;
    out["overruns"] = overruns;
    out["tx_ring_full_waits"] = tx_full;
    out["kicks"] = xsk.kicks();
    out["frames_per_kick"] = xsk.kicks() ? static_cast<double>(k) / static_cast<double>(xsk.kicks()) : 0.0;
    out["xsk_statistics"] = {{"rx_dropped", ks.rx_dropped},          {"rx_invalid_descs", ks.rx_invalid_descs},
                             {"tx_invalid_descs", ks.tx_invalid_descs}, {"rx_ring_full", ks.rx_ring_full},
                             {"rx_fill_ring_empty", ks.rx_fill_ring_empty}, {"tx_ring_empty", ks.tx_ring_empty}};
    out["filter"] = {{"redirected", fs.redirected}, {"passed", fs.passed}, {"keys", program.filter_keys()}};
    out["matching"] = {{"slots", table.slots()},
                       {"bytes_per_slot", kFlowSlotBytes},
                       {"bytes", table.bytes()}};
    out["frame_bytes"] = frame.size();
    out["cpu_s"] = cpu_s;
    out["wall_s"] = wall_s;
    out["cpu_s_per_million_queries"] = k ? cpu_s / static_cast<double>(k) * 1e6 : 0.0;
    std::cout << out.dump() << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"xdp_probe: N DNS queries at a fixed rate through AF_XDP, replies counted (needs root)"};
    app.add_option("--interface", o.interface, "interface to send on and receive from")->required();
    app.add_option("--server", o.server, "DNS server address (IPv4 or IPv6)")->required();
    app.add_option("--port", o.port, "server UDP port");
    app.add_option("--source", o.sources, "ADDR,FIRST-LAST[,...]: tester address and its source ports (repeatable)")
        ->required();
    app.add_option("--rate", o.rate_qps, "queries per second");
    app.add_option("--queries", o.queries, "queries to send");
    app.add_option("--timeout", o.timeout_s, "a reply later than this (s) is late");
    app.add_option("--wait", o.wait_s, "seconds to keep receiving after the last send (default timeout + 0.25)");
    app.add_option("--order", o.order, "flow order: sequential or random (RFC 4814 pseudorandom permutation)");
    app.add_option("--seed", o.seed, "key of the pseudorandom flow order");
    app.add_option("--queue", o.queue, "interface receive/transmit queue");
    app.add_option("--mode", o.mode, "XDP attach mode: auto (native, else generic), native, generic");
    app.add_option("--domain", o.domain, "query domain");
    app.add_option("--qtype", o.qtype, "query type");
    app.add_option("--subnet", o.subnet, "query names: base + (k mod size) of this IPv4 subnet");
    app.add_option("--batch", o.batch, "most frames per TX kick and per RX poll");
    app.add_option("--cpu", o.cpu, "pin to this CPU");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::cerr << "xdp_probe: " << e.what() << std::endl;
        return 2;
    }
}
