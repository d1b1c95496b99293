// xlatperf: parse the command line, run one trial, report it.

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <fstream>
#include <iostream>

#include "net.hpp"
#include "options.hpp"
#include "report.hpp"
#include "trial.hpp"

namespace {

std::atomic<bool> g_stop{false};

// Removes a file when it goes out of scope (nothing once it was renamed away).
struct TempFile {
    std::string path;
    ~TempFile() {
        if (!path.empty()) std::remove(path.c_str());
    }
};

void on_signal(int) {
    g_stop.store(true);
    // A second signal ends the process the default way.
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace xlatperf;
    const CommandLine command = parse_command_line(argc, argv, std::cout, std::cerr);
    if (!command.plan) return command.exit_code;
    const Plan& plan = *command.plan;

    try {
        // The result goes to a temporary file beside --json, renamed over it once
        // complete: a run that fails or is killed leaves an older file untouched.
        const std::string& json_path = plan.config.json_path;
        const std::string json_temp = json_path + ".tmp-" + std::to_string(getpid());
        std::ofstream json_file;
        const TempFile temp_guard{json_path.empty() ? std::string() : json_temp};
        if (!json_path.empty()) {
            json_file.open(json_temp, std::ios::out | std::ios::trunc);
            if (!json_file) {
                throw StartError("cannot write --json " + json_path + " (" + json_temp + "): " +
                                 std::strerror(errno) + "; choose a writable directory");
            }
        }
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        const TrialResult trial = run_trial(plan, plan.config.quiet ? nullptr : &std::cerr, g_stop);
        const RunInfo info = make_run_info(plan, trial);
        if (json_file.is_open()) {
            json_file << to_json(plan, trial, info).dump(2) << '\n';
            json_file.close();
            if (!json_file || std::rename(json_temp.c_str(), json_path.c_str()) != 0) {
                throw std::runtime_error("writing --json " + json_path + " failed: " + std::strerror(errno));
            }
        }
        print_summary(std::cout, plan, trial);
        return trial.interrupted ? kExitInterrupted : kExitOk;
    } catch (const StartError& e) {
        std::cerr << "xlatperf: " << e.what() << '\n';
        return kExitCannotStart;
    } catch (const std::exception& e) {
        std::cerr << "xlatperf: " << e.what() << '\n';
        return kExitCannotStart;
    }
}
