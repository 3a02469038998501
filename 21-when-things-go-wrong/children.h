// children.h — lesson 21's child processes: the program started again with a role, and the
// plumbing between parent and child. No CUDA calls here.
//
// A child is started with posix_spawn of /proc/self/exe (fork + exec in one call). cuda.h says
// nothing about fork: no header promises that a child only forked from a process that called
// cuInit can use CUDA, and a fresh exec carries none of the parent's CUDA state. The child's stdin, stdout and stderr are
// one end of a socket pair; the parent keeps the other. The parent reads every line the child
// prints and prints it again as "[child] LINE", so the child's output lands in the parent's, in
// order; it sends instructions, one line each, to the child's stdin.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace children {

// The environment a child gets: the parent's, without the variables named in `unset`, with the
// "NAME=VALUE" entries of `set` added.
struct Environment {
    std::vector<std::string> unset;
    std::vector<std::string> set;
};

struct Child {
    pid_t pid = -1;
    int socket = -1;      // the parent's end; the child's stdin, stdout and stderr are the other
    std::string output;   // every complete line the child printed so far
    std::string partial;  // what came after the last newline
};

// How long the parent waits for the next line before it gives the child up (readUntil).
constexpr int kQuietLimitSeconds = 30;

// Starts argv (argv[0] is the program's path) with stdin, stdout and stderr on the socket.
// pid -1, and a message on stderr, when it cannot start.
Child start(const std::vector<std::string>& argv, const Environment& environment);
// This program again: /proc/self/exe --child ROLE --device ORDINAL.
Child startSelf(int role, int ordinal, const Environment& environment = {});
// Reads the child's lines, printing each as "[child] LINE", until one starts with `marker`
// (true). False when the child closes its end first, or prints nothing for kQuietLimitSeconds
// (then it is killed: a child that hangs must not hang its parent). An empty marker reads to EOF.
bool readUntil(Child& child, const std::string& marker);
// Sends one line to the child's stdin.
bool tell(Child& child, const std::string& line);
// Ends the child's stdin (EOF), reads and prints the rest of its output, reaps it.
// "exit code N" or "killed by signal N".
std::string finish(Child& child);
// For a child that must not go on: SIGKILL, then finish().
std::string kill(Child& child);
// The value of the child's line "LABEL: VALUE", "" when it printed none.
std::string valueOf(const Child& child, const std::string& label);
// Whether the child printed a line that contains `text`.
bool printed(const Child& child, const std::string& text);
// Whether the child printed a line that contains `text` before its line "LABEL: VALUE" (false
// when either is missing): what came out before a call returned, and what came out after it.
bool printedBefore(const Child& child, const std::string& text, const std::string& label);

// The child's side: stdout line-buffered (each line reaches the parent when it is printed, not
// when a buffer fills), and one instruction from stdin, without its newline ("" at EOF).
void beginChild();
std::string readInstruction();

}  // namespace children
