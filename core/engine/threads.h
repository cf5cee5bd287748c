// How the OpenMP threads wait between parallel regions.
//
// Idle OpenMP threads spin before they sleep (libgomp by default for about 300,000 rounds
// per wait). On a machine whose cores other programs are using, that spinning takes the
// CPU from the thread that has work: appending one token to the Qwen2.5-0.5B shape at
// T=1024 took 786 ms instead of 63 ms while another process kept both cores busy (median
// of 8 appends each way; README, "Long texts and large models"). With the passive policy the idle threads
// sleep at once and cost nothing.
//
// libgomp reads its wait policy from the environment once, when it is loaded, which is
// before main(). So the programs (attnviz, attnviz-cli) call reexec_with_passive_wait()
// first thing: unless the user chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT set), it
// sets OMP_WAIT_POLICY=passive and executes the same program again with the same
// arguments (the process keeps its pid). If that cannot be done it carries on as it is.
#pragma once
#include <string>

namespace attnviz {

void reexec_with_passive_wait(char** argv);

// The wait policy the environment gives the OpenMP runtime: "passive", "active", or
// "default" when none is set; with GOMP_SPINCOUNT set, "spincount=N".
std::string openmp_wait_policy();

}  // namespace attnviz
