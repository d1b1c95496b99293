#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <random>
#include <sstream>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cpulist.hpp"
#include "format.hpp"
#include "histogram.hpp"
#include "net.hpp"
#include "sources.hpp"
#include "version.hpp"

namespace xlatperf {
namespace {

using nlohmann::json;

json nullable_seconds(std::int64_t ns) { return ns < 0 ? json(nullptr) : json(seconds(ns)); }

json cpu_or_null(int cpu) { return cpu < 0 ? json(nullptr) : json(cpu); }

std::string cpu_model() {
    std::ifstream file("/proc/cpuinfo");
    std::string line;
    while (std::getline(file, line)) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
        }
    }
    return "unknown";
}

std::string host_name() {
    char name[256] = {};
    return gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

std::string random_run_id() {
    std::random_device device;
    std::ostringstream out;
    out << std::hex << std::setfill('0') << std::setw(8) << device() << std::setw(8) << device();
    return out.str();
}

std::string utc_text(std::int64_t realtime_ns) {
    const time_t secs = static_cast<time_t>(realtime_ns / 1'000'000'000);
    tm utc{};
    gmtime_r(&secs, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
    std::ostringstream out;
    out << text << '.' << std::setw(3) << std::setfill('0') << (realtime_ns / 1'000'000) % 1000 << 'Z';
    return out.str();
}

}  // namespace

const char* rcode_name(unsigned rcode) {
    static const char* const names[16] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP",   "REFUSED",
                                          "YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH",  "NOTZONE",  "RCODE11",
                                          "RCODE12", "RCODE13", "RCODE14", "RCODE15"};
    return names[rcode & 0x0fu];
}

RunInfo make_run_info(const Plan& plan, const TrialResult& trial) {
    return RunInfo{plan.config.run_id.empty() ? random_run_id() : plan.config.run_id,
                   utc_text(trial.start_realtime_ns)};
}

namespace {

json header_json(const Plan& plan, const RunInfo& info) {
    utsname uts{};
    uname(&uts);
    return json{
        {"tool", "xlatperf"},
        {"version", version()},
        {"run_id", info.run_id},
        {"argv", plan.argv},
        {"start_utc", info.start_utc},
        {"host", host_name()},
        {"kernel", std::string(uts.sysname) + " " + uts.release},
        {"cpu_model", cpu_model()},
        {"cpus_online", sysconf(_SC_NPROCESSORS_ONLN)},
    };
}

json sources_json(const Plan& plan) {
    json out = json::array();
    for (const Source& source : plan.sources) {
        json ranges = json::array();
        for (const PortRange& r : source.ranges) ranges.push_back({r.first, r.last});
        out.push_back({{"address", source.text}, {"port_ranges", ranges}, {"sockets", source.sockets}});
    }
    return out;
}

json config_json(const Plan& plan) {
    const Config& c = plan.config;
    return json{
        {"server", plan.server_text},
        {"port", c.port},
        {"rate_qps", c.rate_qps},
        {"duration_s", plan.scheduled_window_s},
        {"queries", plan.total_queries},
        {"threads", c.threads},
        {"ports_per_thread", c.ports_per_thread},
        {"first_port", c.first_port},
        {"bind", plan.bind_text},
        {"timeout_s", c.timeout_s},
        {"domain", c.domain},
        {"qtype", c.qtype},
        {"subnet", c.subnet},
        {"sender_cpus", plan.sender_cpus},
        {"receiver_cpus", plan.receiver_cpus},
        {"rcvbuf_bytes", c.rcvbuf},
        {"sndbuf_bytes", c.sndbuf},
        {"batch", c.batch},
        {"send_tick_s", c.send_tick_s},
        {"recv_tick_s", c.recv_tick_s},
        {"send_tolerance", c.send_tolerance},
        {"send_tolerance_abs_s", c.send_tolerance_s},
        {"max_lag_s", c.max_lag_s},
        {"latency_from_s", c.latency_from_s},
        {"ring_slots_per_socket", plan.ring_slots},
        {"io", c.io},
        {"flow_order", c.flow_order},
        {"flow_seed", plan.flow_seed},
        {"vlan", c.vlan},
        {"xdp_queues", plan.xdp_queues},
        {"sources", sources_json(plan)},
    };
}

json sockets_json(const TrialResult& trial) {
    const io::SocketReport& sockets = trial.io.sockets;
    return json{
        {"count", sockets.count},
        {"rcvbuf_granted_bytes", sockets.rcvbuf_granted},
        {"sndbuf_granted_bytes", sockets.sndbuf_granted},
        {"buffers_forced", sockets.buffers_forced},
    };
}

json totals_json(const Totals& t) {
    json rcodes = json::object();
    for (unsigned r = 1; r < 16; ++r) {
        if (r <= 5 || t.rcode[r] > 0) rcodes[rcode_name(r)] = t.rcode[r];
    }
    return json{
        {"sent", t.sent},
        {"send_errors", t.send_errors},
        {"unsent", t.unsent},
        {"received", t.received},
        {"valid", t.valid},
        {"late", t.late},
        {"rcode", rcodes},
        {"rcode_errors", t.rcode_errors()},
        {"nodata", t.nodata},
        {"truncated", t.truncated},
        {"malformed", t.malformed},
        {"unexpected", t.unexpected},
        {"unexpected_detail",
         {{"wrong_source", t.wrong_source}, {"unknown_id", t.unknown_id}, {"wrong_question", t.wrong_question}}},
        {"duplicate", t.duplicate},
        {"unanswered", t.unanswered()},
        {"tester_receive_drops", t.tester_drops},
        {"unread_at_end", t.unread_at_end},
        {"unbound_queue_replies", t.unbound_queue_replies},
        {"checksum_errors", t.checksum_errors},
        {"tester_egress_drops", t.egress_drops},
        {"namespace_sndbuf_errors", t.namespace_sndbuf_errors},
    };
}

// Whether the server rewrote the query name's letter case, and the first reply that showed it.
json case_rewrite_json(const TrialResult& trial, const Totals& t) {
    json first = nullptr;
    std::int64_t first_at = INT64_MAX;
    for (const PairResult& p : trial.pairs) {
        const CaseRewriteSeen& seen = p.receive.case_first;
        if (!seen.seen || seen.at_ns >= first_at) continue;
        first_at = seen.at_ns;
        first = {{"thread", p.index},
                 {"address", seen.address},
                 {"port", seen.port},
                 {"id", seen.id},
                 {"query_epoch", seen.query_epoch},
                 {"reply_epoch", seen.spelled_epoch},
                 {"evidence", case_rewrite_name(seen.evidence)},
                 {"at_s", seconds(seen.at_ns)}};
    }
    return json{{"detected", t.case_rewritten > 0}, {"replies", t.case_rewritten}, {"first", first}};
}

// The errno that sent a sender back to sendmmsg, by name; null when none did.
json gso_refused_json(const SenderStats& s) {
    return s.gso_refused_errno ? json(errno_name(static_cast<std::size_t>(s.gso_refused_errno) & 0xffu)) : json(nullptr);
}

json gso_json(const Plan& plan, const TrialResult& trial, const Totals& t) {
    json refused = json::array();
    for (const PairResult& p : trial.pairs) {
        if (p.send.gso_refused_errno) refused.push_back(gso_refused_json(p.send));
    }
    return json{{"mode", plan.config.gso},
                {"used", t.gso_calls > 0},
                {"device", trial.io.gso.device.empty() ? json(nullptr) : json(trial.io.gso.device)},
                {"reason", trial.io.gso.reason},
                {"calls", t.gso_calls},
                {"refused", refused}};
}

json send_json(const Plan& plan, const TrialResult& trial, const Totals& t, const SendFigures& send) {
    const Config& c = plan.config;
    json errnos = json::object();
    for (std::size_t e = 0; e < t.errno_counts.size(); ++e) {
        if (t.errno_counts[e] > 0) errnos[errno_name(e)] = t.errno_counts[e];
    }
    return json{
        {"asked_rate_qps", c.rate_qps},
        {"scheduled_queries", t.scheduled},
        {"scheduled_window_s", send.scheduled_window_s},
        {"window_s", send.window_s},
        {"achieved_rate_qps", send.achieved_rate_qps},
        {"excess_s", send.excess_s},
        {"tolerance_s", plan.effective_send_tolerance_s},
        {"first_send_delay_s", nullable_seconds(t.first_send_ns)},
        {"max_lag_s", seconds(t.max_lag_ns)},
        {"lag", {{"unit", "s"},
                 {"of", "each send call: the larger of its first query's delay at the call's start and its last query's at the call's end"},
                 {"count", trial.send_lag.count()},
                 {"p50", seconds(static_cast<std::int64_t>(trial.send_lag.percentile(0.5)))},
                 {"p99", seconds(static_cast<std::int64_t>(trial.send_lag.percentile(0.99)))},
                 {"p999", seconds(static_cast<std::int64_t>(trial.send_lag.percentile(0.999)))},
                 {"max", seconds(static_cast<std::int64_t>(trial.send_lag.max()))}}},
        {"max_burst", t.max_burst},
        {"max_queries_in_100us", t.max_in_100us},
        {"stop", {{"reason", send_stop_name(t.stop)},
                  {"at_s", nullable_seconds(t.stopped_ns)},
                  {"bound_s", plan.send_bound_s}}},
        {"gso", gso_json(plan, trial, t)},
        {"would_block", t.would_block},
        {"max_retry_stall_s", seconds(t.max_retry_stall_ns)},
        {"ring_overruns", t.ring_overruns},
        {"send_errors_by_errno", errnos},
    };
}

json latency_json(const TrialResult& trial) {
    const LatencyHistogram& h = trial.latency;
    const auto latency = [&h](double p) { return h.count() ? json(seconds(static_cast<std::int64_t>(h.percentile(p)))) : json(nullptr); };
    return json{
        {"unit", "s"},
        {"of", trial.latency_from_s > 0
                   ? "valid replies to the queries sent at least from_s after query 0: kernel receive time "
                     "minus the time just before the query's sendmmsg"
                   : "valid replies: kernel receive time minus the time just before the query's sendmmsg"},
        {"from_s", trial.latency_from_s},
        {"resolution_s", LatencyHistogram::kResolutionNs / 1e9},
        {"relative_resolution", LatencyHistogram::kRelativeResolution},
        {"count", h.count()},
        {"min", h.count() ? json(seconds(static_cast<std::int64_t>(h.min()))) : json(nullptr)},
        {"p50", latency(0.5)},
        {"p90", latency(0.9)},
        {"p99", latency(0.99)},
        {"p999", latency(0.999)},
        {"max", h.count() ? json(seconds(static_cast<std::int64_t>(h.max()))) : json(nullptr)},
    };
}

json cpu_json(const TrialResult& trial, const Totals& t) {
    const double cpu_total = trial.cpu_user_s + trial.cpu_system_s;
    return json{
        {"user_s", trial.cpu_user_s},
        {"system_s", trial.cpu_system_s},
        {"total_s", cpu_total},
        {"per_million_sent_s", t.sent ? json(cpu_total / static_cast<double>(t.sent) * 1e6) : json(nullptr)},
        {"wall_s", trial.wall_s},
        {"max_rss_kib", trial.max_rss_kib},
    };
}

json threads_json(const TrialResult& trial) {
    json threads = json::array();
    for (const PairResult& p : trial.pairs) {
        const SenderStats& s = p.send;
        const ReceiverStats& r = p.receive;
        std::uint64_t rcode_errors = 0;
        for (unsigned c2 = 1; c2 < 16; ++c2) rcode_errors += r.rcode[c2];
        threads.push_back({
            {"index", p.index},
            {"ports", p.ports},
            {"source_addresses", p.source_addresses},
            {"sender_cpu", cpu_or_null(p.sender_cpu)},
            {"receiver_cpu", cpu_or_null(p.receiver_cpu)},
            {"sender_cpus_allowed", format_cpu_list(p.sender_allowed)},
            {"receiver_cpus_allowed", format_cpu_list(p.receiver_allowed)},
            {"sender_last_cpu", s.last_cpu},
            {"receiver_last_cpu", r.last_cpu},
            {"sent", s.sent},
            {"sent_per_port", s.sent_per_socket},
            {"send_errors", s.send_errors},
            {"unsent", s.unsent},
            {"received", r.received},
            {"valid", r.valid},
            {"late", r.late},
            {"rcode_errors", rcode_errors},
            {"nodata", r.nodata},
            {"truncated", r.truncated},
            {"malformed", r.malformed},
            {"unexpected", r.unexpected},
            {"duplicate", r.duplicate},
            {"final_drain", r.final_drain},
            {"unread_at_end", r.unread_at_end},
            {"first_send_s", nullable_seconds(s.first_send_ns)},
            {"last_send_s", nullable_seconds(s.last_send_ns)},
            {"max_lag_s", seconds(s.max_lag_ns)},
            {"max_lag_at_s", nullable_seconds(s.max_lag_at_ns)},
            {"stop_reason", send_stop_name(s.stop)},
            {"stopped_at_s", nullable_seconds(s.stopped_ns)},
            {"max_burst", s.max_burst},
            {"max_queries_in_100us", s.max_in_100us},
            {"would_block", s.would_block},
            {"sendmmsg_calls", s.syscalls},
            {"gso_calls", s.gso_calls},
            {"gso_refused", gso_refused_json(s)},
            {"recvmmsg_calls", r.syscalls},
            {"sender_wakeups", s.wakeups},
            {"receiver_wakeups", r.wakeups},
            {"sender_cpu_s", s.cpu_s},
            {"receiver_cpu_s", r.cpu_s},
        });
    }
    return threads;
}

json series_json(const TrialResult& trial) {
    json series = json::array();
    for (std::size_t i = 0; i < trial.series.size(); ++i) {
        const SeriesRow& row = trial.series[i];
        series.push_back({
            {"second", i + 1},
            {"sent", row.sent},
            {"valid", row.valid},
            {"late", row.late},
            {"failed", row.failed},
            {"unmatched", row.unmatched},
            {"loss_ratio", row.sent ? json(1.0 - static_cast<double>(row.valid) / static_cast<double>(row.sent))
                                    : json(nullptr)},
        });
    }
    return series;
}

}  // namespace

json to_json(const Plan& plan, const TrialResult& trial, const RunInfo& info) {
    const Totals t = sum(plan, trial);
    const SendFigures send = send_figures(plan, t);
    const Verdict verdict = judge(plan, trial, t, send);
    json doc;
    doc["schema_version"] = kSchemaVersion;
    doc["header"] = header_json(plan, info);
    doc["config"] = config_json(plan);
    doc["sockets"] = sockets_json(trial);
    doc["totals"] = totals_json(t);
    doc["loss_ratio"] = t.loss_ratio();
    doc["send"] = send_json(plan, trial, t, send);
    doc["verdict"] = {{"status", verdict.status()}, {"reasons", verdict.reasons}};
    doc["warnings"] = verdict.warnings;
    doc["case_rewrite"] = case_rewrite_json(trial, t);
    json devices = json::array();
    for (const EgressDevice& d : trial.egress) {
        devices.push_back({{"name", d.name},
                           {"qdisc", d.qdisc.empty() ? json(nullptr) : json(d.qdisc)},
                           {"qdisc_drops", d.qdisc_drops},
                           {"tx_dropped", d.tx_dropped},
                           {"read", d.read}});
    }
    doc["egress"] = {{"devices", devices},
                     {"counted_from", t.egress_from_devices ? "devices" : "namespace-sndbuf-errors"}};
    doc["receive"] = {{"final_drain", t.final_drain},
                      {"final_drain_s", seconds(t.final_drain_ns)},
                      {"unread_at_end", t.unread_at_end}};
    doc["latency"] = latency_json(trial);
    doc["cpu"] = cpu_json(trial, t);
    doc["threads"] = threads_json(trial);
    doc["series"] = series_json(trial);
    doc["io"] = io::to_json(trial.io);
    return doc;
}

void print_summary(std::ostream& out, const Plan& plan, const TrialResult& trial) {
    const Config& c = plan.config;
    const Totals t = sum(plan, trial);
    const SendFigures send = send_figures(plan, t);
    const Verdict verdict = judge(plan, trial, t, send);
    const LatencyHistogram& h = trial.latency;
    std::ostringstream s;
    s << "xlatperf " << version() << ": server " << to_string(plan.server) << ", " << fixed(c.rate_qps, 1)
      << " queries/s for " << fixed(plan.scheduled_window_s, 3) << " s, " << c.threads << " thread pair(s) x "
      << c.ports_per_thread << " port(s), timeout " << c.timeout_s << " s\n";
    s << "  sent        " << t.sent << " of " << t.scheduled << " queries in " << fixed(send.window_s, 6)
      << " s = " << fixed(send.achieved_rate_qps, 1) << " queries/s (schedule: "
      << fixed(send.scheduled_window_s, 6) << " s, max lag " << duration_text(seconds(t.max_lag_ns)) << ")\n";
    if (t.stop != SendStop::schedule_sent) {
        s << "  stopped     the senders stopped " << fixed(seconds(t.stopped_ns), 3) << " s after the start: "
          << send_stop_name(t.stop) << " (send bound " << fixed(plan.send_bound_s, 3)
          << " s = window + send tolerance + --max-lag)\n";
    }
    s << "  valid       " << t.valid << " queries; loss " << percent(t.loss_ratio()) << " (1 - valid/sent)\n";
    s << "  other       late " << t.late << ", error RCODE " << t.rcode_errors();
    for (unsigned r = 1; r < 16; ++r) {
        if (t.rcode[r] > 0) s << " (" << rcode_name(r) << " " << t.rcode[r] << ")";
    }
    s << ", nodata " << t.nodata << ", truncated (TC) " << t.truncated << ", unanswered " << t.unanswered()
      << " queries\n";
    if (t.checksum_errors > 0) {
        s << "  checksum    " << t.checksum_errors
          << " UDP datagrams with a bad checksum reached the tester (the DUT's fault; their queries count "
             "as unanswered)\n";
    }
    s << "  unmatched   malformed " << t.malformed << ", unexpected " << t.unexpected << ", duplicate "
      << t.duplicate << " datagrams\n";
    if (h.count() > 0) {
        const auto lat = [&h](double p) { return duration_text(seconds(static_cast<std::int64_t>(h.percentile(p)))); };
        s << "  latency     min " << duration_text(seconds(static_cast<std::int64_t>(h.min()))) << ", p50 "
          << lat(0.5) << ", p90 " << lat(0.9) << ", p99 " << lat(0.99) << ", p99.9 " << lat(0.999) << ", max "
          << duration_text(seconds(static_cast<std::int64_t>(h.max()))) << " (valid replies, resolution 0.1 %)\n";
    } else {
        s << "  latency     no valid replies\n";
    }
    const double cpu = trial.cpu_user_s + trial.cpu_system_s;
    s << "  tester      CPU " << fixed(cpu, 3) << " s (user " << fixed(trial.cpu_user_s, 3) << " s, system "
      << fixed(trial.cpu_system_s, 3) << " s)";
    if (t.sent > 0) s << " = " << fixed(cpu / static_cast<double>(t.sent) * 1e6, 3) << " CPU-s per million queries";
    s << ", peak RSS " << fixed(static_cast<double>(trial.max_rss_kib) / 1024, 1) << " MiB, socket buffers "
      << trial.io.sockets.rcvbuf_granted << " B receive / " << trial.io.sockets.sndbuf_granted << " B send\n";
    s << "  GSO         " << t.gso_calls << " UDP_SEGMENT sends; " << trial.io.gso.reason << "\n";
    s << "  verdict     " << verdict.status() << "\n";
    for (const auto& reason : verdict.reasons) s << "              - " << reason << "\n";
    for (const auto& warning : verdict.warnings) s << "  warning     " << warning << "\n";
    out << s.str() << std::flush;
}

namespace {

const char* file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

std::string parent_directory(const std::string& path) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void check_json_path(const std::string& path) {
    if (path.empty() || path == "-") return;
    const std::string fix = "; give a regular file, a new name in an existing directory, or - for stdout";
    if (path.back() == '/') throw StartError("--json " + path + " names a directory" + fix);
    struct stat info {};
    if (lstat(path.c_str(), &info) == 0) {
        if (!S_ISREG(info.st_mode)) {
            throw StartError("--json " + path + " is " + file_kind(info.st_mode) +
                             ", not a regular file" + fix);
        }
        return;
    }
    if (errno != ENOENT) throw StartError("--json " + path + ": " + std::strerror(errno) + fix);
    const std::string directory = parent_directory(path);
    struct stat dir {};
    if (stat(directory.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode)) {
        throw StartError("--json " + path + ": directory " + directory + " does not exist" + fix);
    }
}

JsonOutput::JsonOutput(std::string path) : path_(std::move(path)) {
    if (path_.empty() || to_stdout()) return;
    check_json_path(path_);
    temp_ = path_ + ".tmp-" + std::to_string(getpid());
    fd_ = open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0) {
        const int error = errno;
        temp_.clear();
        throw StartError("cannot write --json " + path_ + " (temporary file beside it): " + std::strerror(error) +
                         "; choose a writable directory");
    }
}

JsonOutput::~JsonOutput() {
    if (fd_ >= 0) close(fd_);
    if (!temp_.empty()) unlink(temp_.c_str());
}

void JsonOutput::commit(const nlohmann::json& doc) {
    const std::string text = doc.dump(2) + "\n";
    if (path_.empty()) return;
    if (to_stdout()) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        if (std::fflush(stdout) != 0) throw std::runtime_error(std::string("writing --json - failed: ") + std::strerror(errno));
        return;
    }
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = write(fd_, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error("writing --json " + path_ + " failed: " + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
    const int closed = close(fd_);
    fd_ = -1;
    if (closed != 0) throw std::runtime_error("writing --json " + path_ + " failed: " + std::strerror(errno));
    // The path may have changed during the trial: never rename over anything but a regular file.
    try {
        check_json_path(path_);
    } catch (const StartError& e) {
        throw std::runtime_error(e.what());
    }
    if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
        throw std::runtime_error("writing --json " + path_ + " failed: " + std::strerror(errno));
    }
    temp_.clear();
}

}  // namespace xlatperf
