// The options of the node-local level (cairn::Redundancy).
#include "cairn/errors.hpp"
#include "cairn/levels.hpp"

namespace cairn {

Redundancy Redundancy::parse(const std::string& text)
{
    if (text == "none")
        return none();
    if (text == "partner")
        return partner();
    if (text == "xor")
        return xor_parity();
    if (text.rfind("xor:", 0) == 0) {
        const std::string k = text.substr(4);
        if (!k.empty() && k.size() <= 6 && k.find_first_not_of("0123456789") == std::string::npos) {
            const int n = std::stoi(k);
            if (n >= 2)
                return xor_parity(n);
        }
    }
    throw error::WrongAPIUsage("redundancy '" + text + "': expected none, partner, xor or xor:K with K >= 2");
}

std::string Redundancy::str() const
{
    switch (scheme) {
    case Scheme::none: return "none";
    case Scheme::partner: return "partner";
    case Scheme::xor_parity: return "xor:" + std::to_string(group_size);
    }
    return "none";
}

} // namespace cairn
