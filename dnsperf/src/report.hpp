#pragma once
// What a trial reports: the JSON document of docs/ARCHITECTURE.md and the
// human summary (the totals and the verdict come from verdict.hpp).

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config.hpp"
#include "trial.hpp"
#include "verdict.hpp"

namespace xlatperf {

// 2: the tester's own drops named as its own (totals.tester_receive_drops, for every I/O backend; 1 had
// tester_socket_drops and tester_buffer_drops), the datagrams left unread at the end counted
// (receive.unread_at_end; 1 had the boolean final_drain_cut), replies on unbound AF_XDP queues counted
// (totals.unbound_queue_replies), and the I/O backend's counters in one shape in every `io` block.
constexpr int kSchemaVersion = 2;

const char* rcode_name(unsigned rcode);

struct RunInfo {
    std::string run_id;
    std::string start_utc;             // ISO 8601, UTC, ms
};

RunInfo make_run_info(const Plan& plan, const TrialResult& trial);

nlohmann::json to_json(const Plan& plan, const TrialResult& trial, const RunInfo& info);

void print_summary(std::ostream& out, const Plan& plan, const TrialResult& trial);

// Where --json goes. "-" is stdout. A path must be a regular file or a new name in
// an existing directory: anything else (a device such as /dev/null, a directory, a
// symbolic link, a FIFO, a missing directory) is refused before the trial with a
// StartError, because the result is written to a temporary file beside the path and
// renamed over it once complete (a failed or killed run leaves an earlier file
// untouched), and a rename would replace whatever the path names. The temporary
// file is removed unless commit() renamed it.
class JsonOutput {
public:
    explicit JsonOutput(std::string path);  // empty: no JSON
    ~JsonOutput();
    JsonOutput(const JsonOutput&) = delete;
    JsonOutput& operator=(const JsonOutput&) = delete;
    bool to_stdout() const { return path_ == "-"; }
    void commit(const nlohmann::json& doc);  // throws std::runtime_error when the write fails

private:
    std::string path_;
    std::string temp_;
    int fd_ = -1;
};

// Throws StartError unless `path` may take the --json result (see JsonOutput).
void check_json_path(const std::string& path);

}  // namespace xlatperf
