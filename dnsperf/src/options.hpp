#pragma once
// The command line: CLI11 binds every option to one Config whose member
// initialisers are the defaults (so --help shows exactly what a run uses), and
// make_plan() checks the combination and derives what the trial needs.

#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.hpp"

namespace xlatperf {

// A bad option or combination; what() is one line saying what is wrong and how to fix it.
struct OptionError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

// Exit codes of xlatperf.
enum ExitCode : int {
    kExitOk = 0,            // the trial ran (whatever its loss), or --help / --version
    kExitCannotStart = 1,   // a socket, file or thread could not be set up
    kExitBadOptions = 2,    // bad option or combination
    kExitInterrupted = 130, // SIGINT / SIGTERM during the trial (results still written)
};

struct CommandLine {
    std::optional<Plan> plan;   // set when a trial should run
    int exit_code = kExitOk;    // otherwise: exit with this (help/version printed, or one error line)
};

// Parses argv; prints --help/--version on `out`, or ONE error line on `err`.
CommandLine parse_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// Validates a Config and derives the Plan; throws OptionError.
Plan make_plan(const Config& config, std::vector<std::string> argv = {});

// The --help text (for tests and the man page).
std::string help_text();

}  // namespace xlatperf
