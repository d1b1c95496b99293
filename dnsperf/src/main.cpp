// xlatperf: parse the command line, run one trial, report it.

#include <atomic>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>

#include "net.hpp"
#include "options.hpp"
#include "report.hpp"
#include "trial.hpp"

namespace {

std::atomic<bool> g_stop{false};

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
        std::ofstream json_file;
        if (!plan.config.json_path.empty()) {
            json_file.open(plan.config.json_path, std::ios::out | std::ios::trunc);
            if (!json_file) {
                throw StartError("cannot write --json " + plan.config.json_path + ": " + std::strerror(errno));
            }
        }
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        const TrialResult trial = run_trial(plan, plan.config.quiet ? nullptr : &std::cerr, g_stop);
        const RunInfo info = make_run_info(plan, trial);
        if (json_file.is_open()) {
            json_file << to_json(plan, trial, info).dump(2) << '\n';
            json_file.close();
            if (!json_file) throw std::runtime_error("writing --json " + plan.config.json_path + " failed");
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
