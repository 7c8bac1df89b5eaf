// adamant config-keys: every training-config key Adamant acts on, with its default and
// meaning, as the Markdown table docs/config.md holds.
#include <cstdio>

#include "adamant/tools/commands.h"
#include "adamant/train/train_config.h"

namespace adamant::tools {

void add_config_keys_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("config-keys", "List the training config's keys, defaults and meanings (Markdown)");
  cmd->callback([] { std::fputs(train::config_keys_markdown().c_str(), stdout); });
}

}  // namespace adamant::tools
