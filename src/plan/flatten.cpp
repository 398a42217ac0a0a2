#include "cairn/errors.hpp"
#include "cairn/planner.hpp"

#include <set>

namespace cairn {

namespace {
void flatten_into(StateDict& dict, const std::string& prefix, std::vector<FlatEntry>& out, std::set<std::string>& seen,
                  std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>>& keep, int depth)
{
    if (depth > 64)
        throw error::WrongAPIUsage("state dict nested more than 64 levels deep at '" + prefix + "' (a cycle?)");
    for (auto& [name, entry] : dict.entries()) {
        const std::string fqn = prefix.empty() ? name : prefix + "." + name;
        if (auto* nested = std::get_if<std::shared_ptr<StateDict>>(&entry)) {
            flatten_into(**nested, fqn, out, seen, keep, depth + 1);
        } else if (auto* obj = std::get_if<Stateful*>(&entry)) {
            auto sd = std::make_shared<StateDict>((*obj)->state_dict());
            keep.emplace_back(*obj, sd);
            flatten_into(*sd, fqn, out, seen, keep, depth + 1);
        } else {
            if (!seen.insert(fqn).second)
                throw error::WrongAPIUsage("state dict: two entries flatten to the same name '" + fqn + "'");
            out.push_back(FlatEntry{fqn, &entry});
        }
    }
}
} // namespace

std::vector<FlatEntry> flatten(StateDict& state, std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>>& keep)
{
    std::vector<FlatEntry> out;
    std::set<std::string> seen;
    flatten_into(state, "", out, seen, keep, 0);
    return out;
}

} // namespace cairn
