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

constexpr int kSchemaVersion = 1;

const char* rcode_name(unsigned rcode);

struct RunInfo {
    std::string run_id;
    std::string start_utc;             // ISO 8601, UTC, ms
};

RunInfo make_run_info(const Plan& plan, const TrialResult& trial);

nlohmann::json to_json(const Plan& plan, const TrialResult& trial, const RunInfo& info);

void print_summary(std::ostream& out, const Plan& plan, const TrialResult& trial);

}  // namespace xlatperf
