// Cairn: exception types. Every public call reports failure by throwing one of
// these; collective calls throw the same type with the same message on every rank.
#pragma once

#include <stdexcept>
#include <string>

namespace cairn {

/// Base of every exception Cairn throws.
class Error : public std::runtime_error {
public:
    /// Stable code of the concrete class, one per class below (`generic`:
    /// a plain cairn::Error). The same numbers are the C API's error codes
    /// (CAIRN_ERR_USAGE ... CAIRN_ERR_INTERNAL, <cairn/cairn.h>), and the
    /// error agreement sends them between ranks to re-create the same
    /// exception on every rank (throw_error).
    enum class Kind : int {
        usage = 1,
        mismatch = 2,
        read = 3,
        write = 4,
        format = 5,
        not_found = 6,
        integrity = 7,
        concurrent = 8,
        generic = 64,
        internal = 66,
    };

    Error(Kind kind, const std::string& what) : std::runtime_error(what), m_kind(kind) {}
    Kind kind() const noexcept { return m_kind; }

private:
    Kind m_kind;
};

namespace error {

/// The caller used the API wrongly: a bad shard, box, name or option. Names
/// the entry and what is wrong with it.
class WrongAPIUsage : public Error {
public:
    explicit WrongAPIUsage(const std::string& what) : Error(Kind::usage, what) {}
};

/// The state dict and the checkpoint (or the ranks among themselves) disagree:
/// a dtype, a global shape, a key set. The message gives both values.
class Mismatch : public Error {
public:
    explicit Mismatch(const std::string& what) : Error(Kind::mismatch, what) {}
};

/// Reading a checkpoint failed (I/O error, short read). Names the file.
class ReadError : public Error {
public:
    explicit ReadError(const std::string& what) : Error(Kind::read, what) {}
};

/// Writing a checkpoint failed (I/O error, full disk, permission). Names the file.
class WriteError : public Error {
public:
    explicit WriteError(const std::string& what) : Error(Kind::write, what) {}
};

/// Stored bytes are not what Cairn wrote: corrupt or foreign metadata, an
/// unknown format version, an encoded plan that does not decode.
class FormatError : public Error {
public:
    explicit FormatError(const std::string& what) : Error(Kind::format, what) {}
};

/// Stored data does not match its checksum: names the entry, the file, the
/// byte range and the rank that found it.
class IntegrityError : public Error {
public:
    explicit IntegrityError(const std::string& what) : Error(Kind::integrity, what) {}
};

/// The checkpoint (or an entry asked for) does not exist.
class NotFound : public Error {
public:
    explicit NotFound(const std::string& what) : Error(Kind::not_found, what) {}
};

/// Another job uses the same checkpoint path at the same time: a save found
/// the path being written by another (its lock held, or its owner token
/// replaced), or a load or verify found the checkpoint replaced while it
/// read. Names the path and, where known, the other job (host, pid).
class ConcurrentAccess : public Error {
public:
    explicit ConcurrentAccess(const std::string& what) : Error(Kind::concurrent, what) {}
};

/// A broken invariant inside Cairn: a bug of Cairn's own, never a consequence
/// of the caller's input or of the file system. Names the invariant.
class Internal : public Error {
public:
    explicit Internal(const std::string& what) : Error(Kind::internal, what) {}
};

/// Throws the exception of `kind` with `what`: the one map from a Kind to
/// its class (a plain cairn::Error for `generic` and for a value that is
/// no Kind). Used after error agreement.
[[noreturn]] void throw_error(Error::Kind kind, const std::string& what);

} // namespace error
} // namespace cairn
