#include "app/cli.h"

#include <sstream>

#include "app/commands.h"
#include "attnviz_version.h"
#include "core/error.h"
#include "core/limits.h"

namespace attnviz {

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  Io io{out, err};
  CLI::App app{"attnviz-cli: run a causal transformer and record every step of attention"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attnviz-cli " ATTNVIZ_VERSION);
  const std::vector<Action> actions = {add_info_command(app, io), add_dump_command(app, io),
                                       add_bench_command(app, io), add_random_command(app, io),
                                       add_export_command(app, io), add_train_command(app, io),
                                       add_eval_command(app, io), add_heads_command(app, io),
                                       add_tokenize_command(app, io),
                                       add_lens_command(app, io), add_patch_command(app, io),
                                       add_chat_command(app, io), add_models_command(app, io),
                                       add_qk_command(app, io), add_scan_command(app, io)};
  const auto subs = app.get_subcommands({});  // in the order added, matching `actions`

  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const auto* s : subs) known |= s->get_name() == argv[1];
    if (!known) {
      std::string choices;
      for (const auto* s : subs) choices += " " + s->get_name();
      err << format_message(
          "error", "unknown subcommand '" + excerpt(argv[1]) + "' (choose one of:" + choices + "; see --help)");
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  try {
    for (size_t i = 0; i < subs.size(); ++i)
      if (subs[i]->parsed()) actions[i]();
  } catch (const Error& e) {
    err << format_message("error", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    err << format_message("error", "out of memory\n  HINT: use a shorter text (--block-size) or a smaller model.");
    return 1;
  } catch (const std::exception& e) {
    err << format_message("error", e.what());
    return 1;
  }
  return 0;
}

CliResult run_cli_captured(std::vector<std::string> args) {
  args.insert(args.begin(), "attnviz-cli");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

}  // namespace attnviz
