#pragma once
// Subcommands of the `agentkv` binary. Each returns a process exit code
// (0 ok, 1 runtime failure, 2 usage error) and owns its flag parsing.
// main.cc dispatches on argv[1]; argv here starts at the subcommand name.

namespace agentkv::cli {

int CmdGenerate(int argc, char** argv);    // cmd_generate.cc
int CmdSynthModel(int argc, char** argv);  // cmd_synth_model.cc
int CmdServe(int argc, char** argv);       // cmd_serve.cc
int CmdRun(int argc, char** argv);         // cmd_run.cc
int CmdDemo(int argc, char** argv);        // cmd_demo.cc
int CmdCache(int argc, char** argv);       // cmd_cache.cc
int CmdPpl(int argc, char** argv);         // cmd_ppl.cc
int CmdBench(int argc, char** argv);       // cmd_bench.cc: store | kvtypes | ppl
int CmdBenchStore(int argc, char** argv);  // cmd_bench_store.cc
int CmdBenchKvTypes(int argc, char** argv);  // cmd_bench_kvtypes.cc
int CmdBenchRestore(int argc, char** argv);  // cmd_bench_restore.cc

}  // namespace agentkv::cli
