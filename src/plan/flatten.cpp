#include "cairn/errors.hpp"
#include "cairn/planner.hpp"

#include <map>

namespace cairn {

namespace {
void flatten_into(StateDict& dict, const std::string& prefix, std::vector<FlatEntry>& out,
                  std::map<std::string, const Entry*>& seen,
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
            const auto [at, fresh] = seen.emplace(fqn, &entry);
            if (!fresh) {
                // Several boxes of one array share its name; nothing else may.
                const auto* a = std::get_if<ArrayShard>(at->second);
                const auto* b = std::get_if<ArrayShard>(&entry);
                if (!a || !b)
                    throw error::WrongAPIUsage("state dict: two entries flatten to the same name '" + fqn + "'");
                if (a->dtype != b->dtype || a->global_shape != b->global_shape)
                    throw error::WrongAPIUsage("array '" + fqn + "': box " + b->box.str() + " has dtype " +
                                               std::string(dtype_name(b->dtype)) + " and global shape " +
                                               shape_str(b->global_shape) + ", but box " + a->box.str() + " has " +
                                               std::string(dtype_name(a->dtype)) + " and " +
                                               shape_str(a->global_shape) + " (the boxes of one array share both)");
            }
            out.push_back(FlatEntry{fqn, &entry});
        }
    }
}
} // namespace

std::vector<FlatEntry> flatten(StateDict& state, std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>>& keep)
{
    std::vector<FlatEntry> out;
    std::map<std::string, const Entry*> seen;
    flatten_into(state, "", out, seen, keep, 0);
    return out;
}

} // namespace cairn
