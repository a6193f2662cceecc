#pragma once
// Tiny flag parser shared by subcommands: "--name value", "-n value",
// "--flag" booleans, with AGENTKV_<NAME> environment fallbacks.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace agentkv::cli {

class Flags {
 public:
  // Parses argv[1..]; argv[0] is the subcommand. Unknown flags are kept and
  // reported by Unknown(); positional arguments go to positional(). A flag
  // not in `boolean_flags` takes a value: "--name=VALUE" or "--name VALUE",
  // where VALUE must not look like a flag ("-5" does not); one without its
  // value is dropped and reported by error().
  Flags(int argc, char** argv, const std::vector<std::string>& boolean_flags = {});

  // The first command-line error ("--admin-key needs a value ..."), or "".
  // Every command refuses to run when it is set.
  const std::string& error() const { return error_; }

  // Value of --long (or -short); then env AGENTKV_<LONG> (dashes -> '_', upper).
  std::optional<std::string> Get(const std::string& long_name, const std::string& short_name = "") const;
  std::string GetOr(const std::string& long_name, const std::string& short_name, const std::string& def) const;
  bool Has(const std::string& long_name) const;
  // Every value of a repeatable --long, in command-line order; the env
  // fallback AGENTKV_<LONG> only when the flag was not given at all.
  std::vector<std::string> GetAll(const std::string& long_name) const;
  // Parses an integer/float value; returns false (and sets *error) when malformed.
  bool GetInt(const std::string& long_name, const std::string& short_name, long long def, long long* out,
              std::string* error) const;
  bool GetFloat(const std::string& long_name, const std::string& short_name, double def, double* out,
                std::string* error) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Flags given that are not in `known`.
  std::vector<std::string> Unknown(const std::vector<std::string>& known) const;

 private:
  std::map<std::string, std::string> values_;  // the last value of each flag
  std::vector<std::pair<std::string, std::string>> all_values_;  // every one, in order
  std::vector<std::string> positional_;
  std::string error_;
};

// "a,b,,c" -> {"a", "b", "", "c"}: the items of a comma-separated flag value
// (empty items kept, so a caller can reject them).
std::vector<std::string> SplitCommaList(const std::string& value);

}  // namespace agentkv::cli
