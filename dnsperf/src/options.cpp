#include "options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cmath>
#include <fstream>
#include <random>
#include <ostream>
#include <sstream>

#include "cpulist.hpp"
#include "net.hpp"
#include "query.hpp"
#include "histogram.hpp"
#include "sources.hpp"
#include "trial.hpp"
#include "version.hpp"
#include "xdp/filter_abi.h"

namespace xlatperf {
namespace {

const char* const kDescription =
    "xlatperf sends DNS queries over UDP at an exact rate for a fixed time from N sender/receiver thread "
    "pairs with K source ports each, matches every reply to its query, and reports the loss ratio "
    "(1 - valid/sent), latency percentiles and whether the tester itself kept to the asked rate. "
    "Query k asks for the name of the IPv4 address subnet_base + (k mod subnet size) written "
    "AAA-BBB-CCC-DDD.<domain>. (dns64perf++ names).";

const char* const kFooter =
    "Exit status: 0 when the trial ran, whatever its loss; 1 when it could not start; 2 for bad options; "
    "130 when interrupted (results so far are still written). A trial whose send window overran the "
    "tolerance, with a query later than --max-lag, a send error, or replies dropped at the tester's own "
    "sockets gets verdict \"tester-limited\": its loss is not the server's.";

// Builds the parser over `config`; the defaults it shows are config's current values.
void add_verdict_and_output_options(CLI::App& app, Config& config);

void add_options(CLI::App& app, Config& config) {
    app.option_defaults()->always_capture_default();
    app.set_version_flag("--version", std::string("xlatperf ") + version());
    app.footer(kFooter);

    const char* target = "Target";
    app.add_option("-s,--server", config.server, "DNS server address, IPv4 or IPv6 literal (required)")
        ->type_name("ADDR")->required()->group(target);
    app.add_option("-p,--port", config.port, "DNS server UDP port")
        ->type_name("PORT")->check(CLI::Range(1, 65535))->group(target);

    const char* load = "Load";
    const CLI::Validator not_negative(
        [](std::string& text) {
            return text.find('-') != std::string::npos ? "must be a whole number 0 or more, not " + text : std::string();
        },
        "N>=0");
    auto* rate = app.add_option("-r,--rate", config.rate_qps, "query rate, total over all threads, queries/s")
        ->type_name("QPS")->group(load);
    auto* duration = app.add_option("-d,--duration", config.duration_s, "trial length, s (the send schedule spans it)")
        ->type_name("S")->group(load);
    auto* queries = app.add_option("-n,--queries", config.queries,
                                   "send exactly N queries instead of rate x duration (0: use --duration)")
        ->type_name("N")->check(not_negative)->group(load);
    duration->excludes(queries);
    (void)rate;
    app.add_option("-t,--timeout", config.timeout_s,
                   "a reply later than this after its query is late, not valid, s (RFC 8219: 0.25)")
        ->type_name("S")->group(load);

    const char* names = "Queries";
    app.add_option("--domain", config.domain, "zone the query names end in")->type_name("NAME")->group(names);
    app.add_option("--qtype", config.qtype, "query type")->type_name("TYPE")->group(names);
    app.add_option("--subnet", config.subnet,
                   "IPv4 subnet the names enumerate; names wrap around at its size")
        ->type_name("CIDR")->group(names);

    const char* threads = "Threads and sockets";
    app.add_option("-T,--threads", config.threads, "sender + receiver thread pairs")
        ->type_name("N")->group(threads);
    app.add_option("-K,--ports-per-thread", config.ports_per_thread,
                   "source ports (UDP sockets) per sender; queries go round-robin over them")
        ->type_name("K")->group(threads);
    app.add_option("--first-port", config.first_port,
                   "first source port; thread i socket j uses first + i*K + j (0: ephemeral ports)")
        ->type_name("PORT")->group(threads);
    app.add_option("--bind", config.bind, "local address to send from (empty: any of the server's family)")
        ->type_name("ADDR")->group(threads);
    app.add_option("--source", config.sources,
                   "instead of --bind/--first-port, repeatable: send from ADDR with source ports from these "
                   "ranges in order (none: ephemeral); thread i socket j uses source (i*K + j) mod S, e.g. "
                   "--source 192.0.2.8,55296-57343 --source 192.0.2.9,55296-57343")
        ->type_name("ADDR[,FIRST-LAST...]")->allow_extra_args(false)->group(threads);
    app.add_option("--sender-cpus", config.sender_cpus,
                   "pin sender i to the i-th CPU of this list, cyclically, e.g. 0 or 0,2-3 (empty: no pinning)")
        ->type_name("LIST")->group(threads);
    app.add_option("--receiver-cpus", config.receiver_cpus,
                   "pin receiver i to the i-th CPU of this list, cyclically (empty: no pinning)")
        ->type_name("LIST")->group(threads);
    app.add_option("--rcvbuf", config.rcvbuf,
                   "SO_RCVBUF asked per socket, bytes (0: kernel default; as root not capped by rmem_max)")
        ->type_name("BYTES")->group(threads);
    app.add_option("--sndbuf", config.sndbuf, "SO_SNDBUF asked per socket, bytes (0: kernel default)")
        ->type_name("BYTES")->group(threads);
    app.add_option("--batch", config.batch, "most queries per sendmmsg and replies per recvmmsg, messages")
        ->type_name("N")->group(threads);
    app.add_option("--gso", config.gso,
                   "send each batch as one UDP_SEGMENT (GSO) sendmsg: auto = only where this kernel cuts it "
                   "into datagrams before anything else sees it (loopback, or a device with "
                   "tx-udp-segmentation off), on, off (sendmmsg)")
        ->type_name("MODE")->group(threads);
    app.add_option("--send-tick", config.send_tick_s,
                   "a sender wakes at most once per tick and sends all queries due, s (0: wake per query)")
        ->type_name("S")->group(threads);
    app.add_option("--recv-tick", config.recv_tick_s,
                   "a receiver that got replies sleeps this long before reading again, so one recvmmsg "
                   "reads many; latency uses kernel timestamps and is not affected, s (0: no pause)")
        ->type_name("S")->group(threads);

    const char* io = "I/O";
    app.add_option("--io", config.io,
                   "how queries leave and replies arrive: socket (UDP sockets) or xdp (AF_XDP on one interface "
                   "queue per thread pair: each (source address, port) of --source or --bind/--first-port is a flow "
                   "without a socket; needs root and source ports given)")
        ->type_name("MODE")->group(io);
    app.add_option("--xdp-mode", config.xdp_mode,
                   "--io xdp: attach the reply filter in native (driver) or generic (skb) XDP mode, or auto "
                   "(native, else generic)")
        ->type_name("MODE")->group(io);
    app.add_option("--xdp-interface", config.xdp_interface,
                   "--io xdp: the interface (empty: the one the route to the server leaves by)")
        ->type_name("IF")->group(io);
    auto* first_queue = app.add_option("--xdp-queue", config.xdp_queue,
                                       "--io xdp: the first interface queue: thread pair i binds queue N + i")
        ->type_name("N")->group(io);
    app.add_option("--xdp-queues", config.xdp_queues,
                   "--io xdp: the interface queues as a list (e.g. 0,2-3), one per thread pair in order, instead "
                   "of --xdp-queue")
        ->type_name("LIST")->group(io)->excludes(first_queue);
    app.add_option("--xdp-frames", config.xdp_frames,
                   "--io xdp: UMEM frames for receiving, and as many for sending (power of two; ring sizes "
                   "follow)")
        ->type_name("N")->group(io);
    app.add_option("--flow-order", config.flow_order,
                   "--io xdp: the order in which each round of queries visits the flows: sequential (the "
                   "sources' ports in order) or pseudorandom (RFC 4814: a keyed permutation, every flow once "
                   "per round)")
        ->type_name("ORDER")->group(io);
    app.add_option("--vlan", config.vlan,
                   "--io xdp: tag the query frames with this 802.1Q VLAN ID and take only replies tagged with it "
                   "(0: untagged)")
        ->type_name("ID")->group(io);
    app.add_option("--flow-seed", config.flow_seed,
                   "--io xdp: key of the pseudorandom flow order (0: a random one; the JSON records it)")
        ->type_name("N")->check(not_negative)->group(io);
    app.add_option("--encap", config.encap,
                   "--io xdp: play simulated CEs: send the IPv4 queries inside IPv6 (next header 4) from each CE's "
                   "MAP address (map-e, RFC 7597) or lwB4 address (lw4o6, RFC 7596) to --encap-br, from ports in "
                   "the CE's port set, and take the encapsulated replies (empty: no encapsulation)")
        ->type_name("MODE")->group(io);
    app.add_option("--encap-rule", config.encap_rule,
                   "--encap: IPV6PREFIX,IPV4PREFIX,BITS,PSIDOFFSET: map-e the basic mapping rule (BITS: EA-bits "
                   "length), lw4o6 the lwB4s' IPv6 prefix, the IPv4 pool and the PSID length; CE i has "
                   "IPv4 = prefix + (i >> PSID length), PSID = i mod 2^PSID length")
        ->type_name("RULE")->group(io);
    app.add_option("--encap-ces", config.encap_ces, "--encap: CEs (lwB4s) simulated, numbers 0 .. N-1")
        ->type_name("N")->group(io);
    app.add_option("--encap-ports", config.encap_ports,
                   "--encap: ports each CE sends from, the last N of its port set (0: the whole set, less one "
                   "with PSID offset 0 so that no CE sends from port 0)")
        ->type_name("N")->group(io);
    app.add_option("--encap-br", config.encap_br,
                   "--encap: the BR's (lwAFTR's) IPv6 address, the queries' outer destination and the replies' "
                   "outer source")
        ->type_name("ADDR")->group(io);

    add_verdict_and_output_options(app, config);
}

// The "Verdict" and "Output" groups of the command line.
void add_verdict_and_output_options(CLI::App& app, Config& config) {
    const char* verdict = "Verdict";
    app.add_option("--send-tolerance", config.send_tolerance,
                   "the send window may exceed the scheduled one by this fraction (0.00001 = 0.001 %) ...")
        ->type_name("RATIO")->group(verdict);
    app.add_option("--send-tolerance-abs", config.send_tolerance_s,
                   "... or by this much if larger, s; beyond both the trial is tester-limited")
        ->type_name("S")->group(verdict);
    app.add_option("--max-lag", config.max_lag_s,
                   "a query sent later than this behind its schedule makes the trial tester-limited, s "
                   "(0: no limit)")
        ->type_name("S")->group(verdict);

    app.add_option("--latency-from", config.latency_from_s,
                   "the latency figures cover only the queries sent at least this long after the first (RFC "
                   "8219 §7.2's tagged queries: 60 of a 120 s trial), s (0: every query)")
        ->type_name("S")->group(verdict);

    const char* output = "Output";
    app.add_option("-j,--json", config.json_path, "write the results as one JSON document to FILE (a regular file or a new name in an existing directory; - for stdout)")
        ->type_name("FILE")->group(output);
    app.add_option("--run-id", config.run_id, "identifier recorded in the results (empty: a random one)")
        ->type_name("ID")->group(output);
    app.add_flag("-q,--quiet", config.quiet, "no per-second progress lines on stderr")->group(output);
}

std::string one_line(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text;
}

std::string format_number(double value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

SockAddr parse_address(const std::string& text, const char* option, const char* example) {
    boost::system::error_code error;
    const auto address = boost::asio::ip::make_address(text, error);
    if (error) {
        throw OptionError(std::string("bad ") + option + " '" + text +
                          "': not an IPv4 or IPv6 address literal (example: " + example + ")");
    }
    return to_sockaddr(boost::asio::ip::udp::endpoint(address, 0));
}

std::pair<unsigned, unsigned> ephemeral_port_range() {
    std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
    unsigned low = 32768;
    unsigned high = 60999;
    file >> low >> high;
    return {low, high};
}

std::vector<int> checked_cpus(const std::string& text, const char* option) {
    if (text.empty()) return {};
    std::vector<int> cpus;
    try {
        cpus = parse_cpu_list(text);
    } catch (const std::invalid_argument& e) {
        throw OptionError(std::string(option) + ": " + e.what());
    }
    const std::vector<int> allowed = allowed_cpus();
    for (const int cpu : cpus) {
        if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) {
            throw OptionError(std::string(option) + ": CPU " + std::to_string(cpu) +
                              " is not available to this process (available: " + format_cpu_list(allowed) + ")");
        }
    }
    return cpus;
}

void check(bool ok, const std::string& message) {
    if (!ok) throw OptionError(message);
}

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

// Most queues of --io xdp (entries of the reply filter's XSK map, indexed by the receive queue).
constexpr std::uint64_t kXdpQueues = XLB_MAX_QUEUES;

// Bounds that keep a trial's memory (per-second series) and counters sane.
constexpr double kMaxWindowS = 86400;          // one day of schedule
constexpr std::uint64_t kMaxQueries = 100'000'000'000;

// --server, --port, --bind.
void plan_addresses(const Config& c, Plan& plan) {
    check(!c.server.empty(), "--server is required (example: --server 127.0.0.1)");
    plan.server = parse_address(c.server, "--server", "127.0.0.1 or ::1");
    auto endpoint = to_endpoint(plan.server);
    endpoint.port(c.port);
    plan.server = to_sockaddr(endpoint);
    plan.server_text = endpoint.address().to_string();
    check(c.port != 0, "--port must be 1..65535");
    if (c.bind.empty()) {
        plan.bind = parse_address(plan.server.family() == AF_INET ? "0.0.0.0" : "::", "--bind", "");
    } else {
        plan.bind = parse_address(c.bind, "--bind", "127.0.0.1 or ::1");
        check(plan.bind.family() == plan.server.family(),
              "--bind " + c.bind + " and --server " + c.server + " are of different IP versions");
    }
    plan.bind_text = to_endpoint(plan.bind).address().to_string();
}

// --rate, --threads, --ports-per-thread, --duration / --queries: how much and how long.
void plan_load(const Config& c, Plan& plan) {
    check(finite_positive(c.rate_qps), "--rate must be a positive number of queries/s");
    check(c.threads >= 1 && c.threads <= 1024, "--threads must be 1..1024");
    if (c.io == "xdp") {
        check(c.ports_per_thread >= 1 && c.ports_per_thread <= kMaxFlowsPerThread,
              "--ports-per-thread must be 1.." + std::to_string(kMaxFlowsPerThread) +
                  " with --io xdp (flows: (address, port) pairs without a socket)");
    } else {
        check(c.ports_per_thread >= 1 && c.ports_per_thread <= 65535,
              "--ports-per-thread must be 1..65535 (sockets; --io xdp takes up to " +
                  std::to_string(kMaxFlowsPerThread) + " flows without sockets)");
    }
    check(c.rate_qps >= c.threads, "--rate " + format_number(c.rate_qps) + " is below --threads " +
                                       std::to_string(c.threads) +
                                       ": every sender needs at least 1 query/s; lower --threads");
    if (c.queries > 0) {
        check(c.queries <= kMaxQueries, "--queries " + std::to_string(c.queries) + " is more than " +
                                            format_number(kMaxQueries) + "; send fewer per trial");
        plan.total_queries = c.queries;
    } else {
        check(finite_positive(c.duration_s) && c.duration_s <= kMaxWindowS,
              "--duration must be more than 0 and at most " + format_number(kMaxWindowS) + " s (one day)");
        const double total = std::round(c.rate_qps * c.duration_s);
        check(total >= 1, "--rate x --duration is less than one query; raise either");
        check(total <= kMaxQueries, "--rate x --duration is more than " + format_number(kMaxQueries) +
                                        " queries; lower either");
        plan.total_queries = static_cast<std::uint64_t>(total);
    }
    plan.scheduled_window_s = static_cast<double>(plan.total_queries) / c.rate_qps;
    check(plan.scheduled_window_s <= kMaxWindowS,
          "--queries / --rate is a schedule of " + format_number(plan.scheduled_window_s) +
              " s, more than one day (" + format_number(kMaxWindowS) + " s); raise --rate or send fewer");
}

// Sockets on ephemeral ports must fit the kernel's range (per source address).
void check_ephemeral(std::uint64_t sockets, const std::string& what) {
    const auto [low, high] = ephemeral_port_range();
    check(sockets <= high - low + 1,
          what + " (" + std::to_string(sockets) + ") exceeds the ephemeral port range " + std::to_string(low) +
              "-" + std::to_string(high) + "; set --first-port or use fewer sockets");
}

// Source ports, outstanding queries per socket, the ring.
void plan_sockets(const Config& c, Plan& plan) {
    const std::uint64_t sockets = std::uint64_t{c.threads} * c.ports_per_thread;
    if (!c.sources.empty()) {
        plan_sources(c, plan);
        for (const Source& source : plan.sources) {
            if (source.ranges.empty()) check_ephemeral(source.sockets, "sockets on --source " + source.text);
        }
    } else if (c.first_port != 0) {
        check(c.first_port + sockets - 1 <= 65535,
              "--first-port " + std::to_string(c.first_port) + " + --threads x --ports-per-thread (" +
                  std::to_string(sockets) + ") runs past port 65535; lower one of them");
    } else {
        check_ephemeral(sockets, "--threads x --ports-per-thread");
    }
    if (c.sources.empty()) plan_sources(c, plan);
    check(finite_positive(c.timeout_s) && c.timeout_s <= 60, "--timeout must be more than 0 and at most 60 s");
    plan.timeout_ns = static_cast<std::int64_t>(std::llround(c.timeout_s * 1e9));
    plan.per_socket_rate_qps = c.rate_qps / static_cast<double>(sockets);
    const double outstanding = std::ceil(plan.per_socket_rate_qps * c.timeout_s);
    check(outstanding <= kMaxOutstandingPerSocket,
          "--rate / (--threads x --ports-per-thread) x --timeout = " + format_number(outstanding) +
              " queries outstanding per socket, more than " + format_number(kMaxOutstandingPerSocket) +
              " (half the 16-bit transaction IDs); use more threads or ports per thread");
    check(c.batch >= 1 && c.batch <= 1024, "--batch must be 1..1024");
    check(c.gso == "auto" || c.gso == "on" || c.gso == "off",
          "--gso must be auto, on or off, got '" + c.gso + "'");
    std::uint32_t slots = 64;
    while (slots < 2 * outstanding + 2 * c.batch && slots < 65536) slots *= 2;
    plan.ring_slots = slots;
    const std::uint64_t max_buffer = 1u << 30;
    check(c.rcvbuf <= max_buffer && c.sndbuf <= max_buffer, "--rcvbuf and --sndbuf must be at most 1 GiB");
}

// Ticks and tolerances, and that they fit each other.
void plan_timing(const Config& c, Plan& plan) {
    check(std::isfinite(c.send_tick_s) && c.send_tick_s >= 0 && c.send_tick_s <= 0.01,
          "--send-tick must be 0..0.01 s");
    check(std::isfinite(c.recv_tick_s) && c.recv_tick_s >= 0 && c.recv_tick_s <= 0.01,
          "--recv-tick must be 0..0.01 s");
    check(std::isfinite(c.send_tolerance) && c.send_tolerance >= 0 && c.send_tolerance <= 1,
          "--send-tolerance must be 0..1 (a fraction of the schedule)");
    check(std::isfinite(c.send_tolerance_s) && c.send_tolerance_s >= 0 && c.send_tolerance_s <= kMaxWindowS,
          "--send-tolerance-abs must be 0.." + format_number(kMaxWindowS) + " s");
    check(std::isfinite(c.max_lag_s) && c.max_lag_s >= 0 && c.max_lag_s <= kMaxWindowS,
          "--max-lag must be 0.." + format_number(kMaxWindowS) + " s (0: no check)");
    check(std::isfinite(c.latency_from_s) && c.latency_from_s >= 0 && c.latency_from_s < plan.scheduled_window_s,
          "--latency-from " + format_number(c.latency_from_s) + " s must be at least 0 and shorter than the " +
              format_number(plan.scheduled_window_s) + " s schedule (no query would be tagged)");
    plan.effective_send_tolerance_s = std::max(c.send_tolerance * plan.scheduled_window_s, c.send_tolerance_s);
    // --max-lag 0 turns the lag check off, not the bound: a sender may then run up to one more window late
    // (twice the schedule), which still ends every trial.
    const double lag_allowance_s = c.max_lag_s > 0 ? c.max_lag_s : plan.scheduled_window_s;
    plan.send_bound_s = plan.scheduled_window_s + plan.effective_send_tolerance_s + lag_allowance_s;
    // The last query may leave up to one tick late; a tolerance below that fails every trial.
    check(c.send_tick_s <= plan.effective_send_tolerance_s,
          "--send-tick " + format_number(c.send_tick_s) + " s is larger than the send tolerance " +
              format_number(plan.effective_send_tolerance_s) + " s; lower --send-tick or raise --send-tolerance-abs");
    check(c.max_lag_s == 0 || c.max_lag_s >= c.send_tick_s,
          "--max-lag " + format_number(c.max_lag_s) + " s is smaller than --send-tick " +
              format_number(c.send_tick_s) + " s, which every batch may wait; raise --max-lag (0: no check)");
}

// A socket's transaction IDs wrap after 65 536 queries; the case of the domain's
// letters (0x20 epochs) then tells a reply to an earlier use of an ID from the
// answer to the current one. A domain without letters cannot, so a run whose
// sockets wrap is refused.
void plan_epochs(const Config& c, const Plan& plan) {
    const std::uint64_t sockets = std::uint64_t{c.threads} * c.ports_per_thread;
    const std::uint64_t per_socket = (plan.total_queries + sockets - 1) / sockets;
    const bool letters = std::any_of(c.domain.begin(), c.domain.end(),
                                     [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)) != 0; });
    check(letters || per_socket <= 65536,
          "--domain " + c.domain + " has no letters, so the case of the name cannot tell a reply to a reused "
              "transaction ID from the current one, and each socket sends up to " + std::to_string(per_socket) +
              " queries (IDs wrap after 65536); use a domain with letters or more sockets (--threads x "
              "--ports-per-thread)");
}

// --io xdp: thread pair i binds one interface queue, --xdp-queue + i or the i-th of --xdp-queues; each
// queue once, every one within the reply filter's XSK map.
void plan_xdp_queues(const Config& c, Plan& plan) {
    plan.xdp_queues.clear();
    if (c.xdp_queues.empty()) {
        check(std::uint64_t{c.xdp_queue} + c.threads <= kXdpQueues,
              "--io xdp: --xdp-queue " + std::to_string(c.xdp_queue) + " with --threads " + std::to_string(c.threads) +
                  " binds queues up to " + std::to_string(std::uint64_t{c.xdp_queue} + c.threads - 1) +
                  ", and the reply filter holds queues 0.." + std::to_string(kXdpQueues - 1));
        for (unsigned i = 0; i < c.threads; ++i) plan.xdp_queues.push_back(c.xdp_queue + i);
        return;
    }
    std::vector<int> queues;
    try {
        queues = parse_cpu_list(c.xdp_queues);
    } catch (const std::invalid_argument& e) {
        // The list syntax is the CPU lists': say queue where its message says CPU.
        std::string why = e.what();
        for (auto at = why.find("CPU"); at != std::string::npos; at = why.find("CPU", at)) why.replace(at, 3, "queue");
        throw OptionError("--xdp-queues " + c.xdp_queues + ": " + why);
    }
    check(queues.size() == c.threads, "--xdp-queues " + c.xdp_queues + " names " + std::to_string(queues.size()) +
                                          " queues for --threads " + std::to_string(c.threads) +
                                          ": give one queue per thread pair");
    for (const int queue : queues) {
        check(queue >= 0 && static_cast<std::uint64_t>(queue) < kXdpQueues,
              "--xdp-queues: queue " + std::to_string(queue) + " is beyond the reply filter's queues 0.." +
                  std::to_string(kXdpQueues - 1));
        plan.xdp_queues.push_back(static_cast<std::uint32_t>(queue));
    }
}

// --encap: the rule of the simulated CEs, checked whole before anything is brought up.
void plan_encap(const Config& c, Plan& plan) {
    plan.encap = !c.encap.empty();
    if (!plan.encap) {
        check(c.encap_rule.empty() && c.encap_ces == 0 && c.encap_ports == 0 && c.encap_br.empty(),
              "--encap-rule, --encap-ces, --encap-ports and --encap-br describe the CEs of --encap: add --encap "
              "map-e or --encap lw4o6");
        return;
    }
    check(plan.server.family() == AF_INET, "--encap sends IPv4 queries inside IPv6: --server must be IPv4, got " +
                                               c.server);
    check(c.sources.empty() && c.bind.empty() && c.first_port == 0,
          "--encap sends from the CEs' addresses and port sets: drop --source, --bind and --first-port");
    check(!c.encap_rule.empty(), "--encap needs --encap-rule (example: 2001:db8:ce::/51,192.0.2.0/24,13,0)");
    check(!c.encap_br.empty(), "--encap needs --encap-br, the BR's IPv6 address (example: 2001:db8:6::1)");
    check(c.encap_ces != 0, "--encap needs --encap-ces, the number of CEs (1 or more)");
    try {
        plan.encap_rule = xdp::parse_encap_rule(c.encap, c.encap_rule, c.encap_ces, c.encap_ports, c.encap_br);
    } catch (const std::invalid_argument& e) {
        throw OptionError(e.what());
    }
    plan.encap_br = parse_address(c.encap_br, "--encap-br", "2001:db8:6::1");
}

// --io and the AF_XDP settings: flows need explicit ports (a flow is an address and a port without a
// socket), one thread pair binds one queue, and the flow table holds every query in flight.
void plan_io(const Config& c, Plan& plan) {
    check(c.io == "socket" || c.io == "xdp", "--io must be socket or xdp, got '" + c.io + "'");
    check(c.xdp_mode == "auto" || c.xdp_mode == "native" || c.xdp_mode == "generic",
          "--xdp-mode must be auto, native or generic, got '" + c.xdp_mode + "'");
    check(c.flow_order == "sequential" || c.flow_order == "pseudorandom",
          "--flow-order must be sequential or pseudorandom, got '" + c.flow_order + "'");
    plan.xdp = c.io == "xdp";
    check(plan.xdp || (c.flow_order == "sequential" && c.flow_seed == 0),
          "--flow-order and --flow-seed order the flows of --io xdp; sockets take queries round-robin: add --io xdp "
          "or drop them");
    check(c.vlan <= 4094, "--vlan must be a VLAN ID 1..4094 (0: untagged)");
    check(plan.xdp || c.vlan == 0,
          "--vlan tags the frames of --io xdp; with sockets send through a VLAN interface instead (--bind its "
          "address)");
    check(plan.xdp || c.encap.empty(), "--encap plays the CEs over AF_XDP: add --io xdp");
    plan_encap(c, plan);
    if (!plan.xdp) return;
    plan.flow_pseudorandom = c.flow_order == "pseudorandom";
    plan.flow_seed = c.flow_seed;
    if (plan.flow_seed == 0) {
        std::random_device random;
        while (plan.flow_seed == 0) plan.flow_seed = (std::uint64_t{random()} << 32) | random();
    }
    plan_xdp_queues(c, plan);
    check(c.xdp_frames >= 64 && c.xdp_frames <= (1u << 20) && (c.xdp_frames & (c.xdp_frames - 1)) == 0,
          "--xdp-frames must be a power of two, 64..1048576");
    check(c.batch <= c.xdp_frames, "--batch must not exceed --xdp-frames");
    for (const Source& source : plan.encap ? std::vector<Source>{} : plan.sources) {
        check(!source.ranges.empty() && source.address.family() == plan.server.family() &&
                  !(plan.server.family() == AF_INET
                        ? reinterpret_cast<const sockaddr_in*>(&source.address.storage)->sin_addr.s_addr == 0
                        : IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&source.address.storage)->sin6_addr)),
              "--io xdp needs every source address and its ports: give --source ADDR,FIRST-LAST or --bind ADDR "
              "--first-port PORT (a flow is an address and a port, with no socket to pick either)");
    }
    // The queries in flight at once (two timeouts of the rate, as the socket rings) and two batches.
    // So the table is at most 64 bytes per query in flight plus 64 bytes per query of a batch:
    // 16-byte slots, fewer than twice (2 x in flight + 2 batches).
    plan.xdp_in_flight = static_cast<std::uint64_t>(std::ceil(c.rate_qps * c.timeout_s));
    const double needed = 2.0 * static_cast<double>(plan.xdp_in_flight) + 2.0 * c.batch;
    std::uint64_t slots = 64;
    while (static_cast<double>(slots) < needed) slots *= 2;
    plan.xdp_slots = slots;
}

// What the trial allocates before the first query, and a refusal with the arithmetic above kMaxPreallocBytes.
void plan_memory(const Config& c, Plan& plan) {
    plan.series_rows = static_cast<std::size_t>(
                           std::ceil(std::max(plan.scheduled_window_s, plan.send_bound_s) + 1 + c.timeout_s)) + 2;
    const std::uint64_t sockets = std::uint64_t{c.threads} * c.ports_per_thread;
    const std::uint64_t series = std::uint64_t{c.threads} * plan.series_rows * (sizeof(std::uint64_t) + sizeof(SeriesRow));
    const std::uint64_t histograms =
        std::uint64_t{c.threads} * 8 *
        (LatencyHistogram::index(2 * static_cast<std::uint64_t>(plan.timeout_ns)) + 1 + LatencyHistogram::index(kMaxLagRecordedNs) + 1);
    const std::uint64_t rings =
        plan.xdp ? plan.xdp_slots * 16 : sockets * plan.ring_slots * 4 * sizeof(std::uint64_t);
    const std::uint64_t buffers = std::uint64_t{c.threads} * c.batch * (4096 + 512);
    plan.prealloc_bytes = series + histograms + rings + buffers;
    const auto mib = [](std::uint64_t bytes) { return format_number(std::round(static_cast<double>(bytes) / (1 << 20))) + " MiB"; };
    check(plan.prealloc_bytes <= kMaxPreallocBytes,
          "the trial would preallocate " + mib(plan.prealloc_bytes) + ", more than " + mib(kMaxPreallocBytes) +
              ": per-second series " + std::to_string(c.threads) + " threads x " + std::to_string(plan.series_rows) +
              " s x " + std::to_string(sizeof(std::uint64_t) + sizeof(SeriesRow)) + " B = " + mib(series) +
              ", rings " + std::to_string(sockets) + " sockets x " + std::to_string(plan.ring_slots) + " slots x 32 B = " +
              mib(rings) + ", histograms and buffers " + mib(histograms + buffers) +
              "; use fewer threads or a shorter trial");
}

}  // namespace

Plan make_plan(const Config& c, std::vector<std::string> argv) {
    Plan plan;
    plan.config = c;
    plan.argv = std::move(argv);
    plan_addresses(c, plan);
    plan_load(c, plan);
    plan_sockets(c, plan);
    plan_timing(c, plan);
    plan_io(c, plan);
    plan_memory(c, plan);
    plan_epochs(c, plan);
    try {
        plan.subnet = parse_subnet(c.subnet);
        plan.qtype = parse_qtype(c.qtype);
        const QueryTemplate probe(c.domain, plan.qtype);
        (void)probe;
    } catch (const std::invalid_argument& e) {
        throw OptionError(e.what());
    }
    plan.sender_cpus = checked_cpus(c.sender_cpus, "--sender-cpus");
    plan.receiver_cpus = checked_cpus(c.receiver_cpus, "--receiver-cpus");
    check(c.run_id.size() <= 64 && std::all_of(c.run_id.begin(), c.run_id.end(), [](char ch) {
              return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
          }),
          "--run-id must be at most 64 letters, digits, '-', '_' or '.'");
    return plan;
}

std::string help_text() {
    Config config;
    CLI::App app{kDescription, "xlatperf"};
    add_options(app, config);
    return app.help();
}

CommandLine parse_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
    Config config;
    CLI::App app{kDescription, "xlatperf"};
    add_options(app, config);
    CommandLine result;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
            result.exit_code = app.exit(e, out, err);
            return result;
        }
        err << "xlatperf: " << one_line(e.what()) << " (see xlatperf --help)\n";
        result.exit_code = kExitBadOptions;
        return result;
    }
    try {
        result.plan = make_plan(config, std::vector<std::string>(argv, argv + argc));
    } catch (const OptionError& e) {
        err << "xlatperf: " << one_line(e.what()) << "\n";
        result.exit_code = kExitBadOptions;
    }
    return result;
}

}  // namespace xlatperf
