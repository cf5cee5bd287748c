// attnviz-cli chat: prints the text a model sees for a conversation, rendered with its own
// chat template as transformers' apply_chat_template renders it (byte for byte, no newline
// added), so that it can be compared with Python's jinja2 or fed to --text.
#include "app/commands.h"
#include "core/error.h"

namespace attnviz {

Action add_chat_command(CLI::App& app, Io& io) {
  auto* cmd = app.add_subcommand("chat", "Render a conversation with a model's chat template and print the text");
  struct Options {
    std::string model, messages, template_file, date, bos, eos;
    bool no_generation_prompt = false;
  };
  auto o = std::make_shared<Options>();
  auto* model = cmd->add_option("--model", o->model, "model directory, FILE.gguf or builtin:NAME (its chat template)");
  cmd->add_option("--messages", o->messages, "FILE.json: a list of {\"role\", \"content\"} messages")->required();
  auto* tmpl = cmd->add_option("--template", o->template_file, "FILE.jinja: use this template instead of the model's");
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt,
                "leave out the opening of the assistant's turn (add_generation_prompt=False)");
  cmd->add_option("--date", o->date, "YYYY-MM-DD: the date strftime_now gives (default: today)");
  auto* bos = cmd->add_option("--bos-token", o->bos, "the bos_token the template sees (default: the model's)");
  auto* eos = cmd->add_option("--eos-token", o->eos, "the eos_token the template sees (default: the model's)");
  return [&io, o, model, tmpl, bos, eos] {
    if (model->count() == 0 && tmpl->count() == 0)
      throw Error("give --model M (its chat template) or --template FILE.jinja", ErrorKind::Usage);
    if (!o->date.empty() && !(o->date.size() == 10 && o->date[4] == '-' && o->date[7] == '-'))
      throw Error("--date: '" + o->date + "' is not YYYY-MM-DD", ErrorKind::Usage);
    ChatOptions c;
    c.template_file = o->template_file, c.date = o->date;
    c.add_generation_prompt = !o->no_generation_prompt;
    if (bos->count()) c.bos = o->bos;
    if (eos->count()) c.eos = o->eos;
    io.out << render_chat_file(o->model, o->messages, c);
  };
}

}  // namespace attnviz
