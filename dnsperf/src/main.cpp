// xlatperf: parse the command line, run one trial, report it.

#include <atomic>
#include <csignal>
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
        // Refused before the trial when --json names anything but a regular file or a new name.
        JsonOutput json(plan.config.json_path);
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        const TrialResult trial = run_trial(plan, plan.config.quiet ? nullptr : &std::cerr, g_stop);
        const RunInfo info = make_run_info(plan, trial);
        json.commit(to_json(plan, trial, info));
        // With --json - stdout carries the JSON document alone: the summary goes to stderr.
        print_summary(json.to_stdout() ? std::cerr : std::cout, plan, trial);
        return trial.interrupted ? kExitInterrupted : kExitOk;
    } catch (const StartError& e) {
        std::cerr << "xlatperf: " << e.what() << '\n';
        return kExitCannotStart;
    } catch (const std::exception& e) {
        std::cerr << "xlatperf: " << e.what() << '\n';
        return kExitCannotStart;
    }
}
