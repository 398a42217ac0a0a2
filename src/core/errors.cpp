#include "cairn/errors.hpp"

namespace cairn::error {

void throw_error(Error::Kind kind, const std::string& what)
{
    switch (kind) {
    case Error::Kind::usage: throw WrongAPIUsage(what);
    case Error::Kind::mismatch: throw Mismatch(what);
    case Error::Kind::read: throw ReadError(what);
    case Error::Kind::write: throw WriteError(what);
    case Error::Kind::format: throw FormatError(what);
    case Error::Kind::not_found: throw NotFound(what);
    case Error::Kind::integrity: throw IntegrityError(what);
    case Error::Kind::concurrent: throw ConcurrentAccess(what);
    case Error::Kind::internal: throw Internal(what);
    case Error::Kind::generic: break;
    }
    throw Error(Error::Kind::generic, what); // also for a number that is no Kind
}

} // namespace cairn::error
