// States and byte transitions of the canonical multi-file program language (docs/program.md,
// "Multi-file programs"): sections that edit, create and delete files, copies that name the
// file they take from. The single-file FSM (program_states.h) is left as it is; this one
// shares its number and UTF-8 rules. Numbers are stepped in multi_numbers.cpp, created paths
// in multi_paths.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fnv1a.h"
#include "program_states.h"

namespace cad::program {

constexpr uint64_t kMaxPathChars = 4096;  // the resolver's MAX_PATH_CHARS
constexpr uint64_t kPathHashSeed = fnv1a::kOffsetBasis;

// The hash of a created path's bytes (64-bit FNV-1a), checked against the paths a program
// may not create.
uint64_t path_hash(const std::string& path);
inline uint64_t path_hash_step(uint64_t hash, uint8_t byte) { return fnv1a::byte(hash, byte); }

enum class MMode : uint8_t { Await, Number, Literal, Path, Gen, End };
// Where an Await state is: the program's start (either form), between the ops of a bare
// program, between sections, inside an edit or a create section.
enum class Scope : uint8_t { Top, Bare, Sections, Edit, Create };
// Which number is read: a copy's lines or span (of the file ``MState::file``, else the own
// file), the file a copy names, the file a section edits or deletes.
enum class Field : uint8_t { Lines, Span, CopyFile, EditFile, DeleteFile };
enum class MLiteral : uint8_t {
    CopyTail,      // "/>\n after a copy's last number
    GenNewline,    // \n after </gen>
    EditTail,      // >\n after <edit file="k"
    CreateTail,    // >\n after <create path="p"
    DeleteTail,    // />\n after <delete file="k"
    CloseNewline,  // \n after </edit> or </create>
    AttrLines,     //  lines=" after <copy file="k"
    AttrSpan,      //  span=" after <copy file="k"
};
constexpr int kMLiterals = 8;

enum MOpener : uint8_t {
    MCopyLines = 0,
    MCopySpan,
    MGenOpen,
    MProgramEnd,
    MCopyFile,
    MEditOpen,
    MCreateOpen,
    MDeleteOpen,
    MEditClose,
    MCreateClose,
};
constexpr int kMOpeners = 10;
extern const std::array<std::string, kMOpeners> kMOpenerText;

struct MState {
    MMode mode = MMode::Await;
    Scope scope = Scope::Top;
    // Await: the prefix read is kMOpenerText[opener] cut to ``length`` (``opener`` the first
    // with that prefix). Literal: which literal and how much of it is read.
    uint8_t opener = 0;
    uint8_t length = 0;
    MLiteral literal = MLiteral::CopyTail;
    // Gen and Path: UTF-8 validator state; Gen: how much of </gen> the body ends with; Path:
    // the current segment (0 empty, 1 ".", 2 "..", 3 anything else).
    uint8_t pending = 0;
    uint8_t matched = 0;
    // Number, and a Literal after a number: the field, the numbers finished and in progress.
    Field field = Field::Lines;
    uint8_t field_count = 0;
    uint8_t digit_count = 0;
    uint64_t digits = 0;
    std::array<uint64_t, 4> values{};
    // The file the open section edits (0: none, or a created file) and the file a copy names
    // (0: the own file).
    uint32_t own = 0;
    uint32_t file = 0;
    // Path: characters read and the hash of its bytes.
    uint32_t chars = 0;
    uint64_t hash = kPathHashSeed;
};

struct MStep {
    MState state;
    bool op_ended;  // a line of the program ended: an op, a section tag or a closer
};

// The document-independent identity of a state, indexing the per-tokenizer mask tables (Gen
// states use the single-file gen tables).
constexpr int kMultiSlots = 320;
int multi_slot(const MState& state);

// A file a program may address: its line widths (characters, terminator included).
struct FileLines {
    std::vector<uint64_t> widths;
};

class MultiStructure {
  public:
    // ``editable[k-1]``: file k may be edited or deleted; ``forbidden``: hashes of the paths a
    // created file may not have (the files' own, normalised).
    MultiStructure(std::vector<FileLines> files, std::vector<bool> editable,
                   std::vector<uint64_t> forbidden, bool subline);
    // Unbounded numbers and every opener enabled: the superset the index is built under.
    static MultiStructure shape();

    std::optional<MStep> step(const MState& state, uint8_t byte) const;
    std::optional<MState> walk(MState state, const char* data, size_t size, bool cross_ops) const;
    std::string forced(MState state) const;
    std::string completion(MState state) const;
    std::optional<MState> representative(int slot) const;
    bool enabled(int opener, const MState& state) const;
    // Whether a byte read from ``state`` depends on more than its shape slot: the openers a
    // scope enables, numbers, a path's end (and anything read near the path limit).
    static bool context_dependent(const MState& state, uint8_t byte);

    // The allowed values of a file field, as maximal runs [low, high] (ascending).
    std::vector<std::pair<uint64_t, uint64_t>> file_runs(const MState& state) const;
    // The range of a lines or span number (as the single-file FSM bounds it) of the copy's file.
    std::pair<uint64_t, uint64_t> line_bounds(const MState& state) const;

    // Sections written so far: files edited or deleted, paths created. The matcher records
    // them as their tags end and truncates them on rollback.
    void name_file(uint64_t file);
    void name_path(uint64_t hash);
    size_t named_count() const { return named_.size(); }
    void unname_to(size_t count);

  private:
    struct Named {
        bool is_path;
        uint64_t key;
    };
    MultiStructure(bool shape, bool subline);
    std::optional<MStep> await_step(const MState& state, uint8_t byte) const;
    std::optional<MStep> number_step(const MState& state, uint8_t byte) const;
    std::optional<MStep> literal_step(const MState& state, uint8_t byte) const;
    std::optional<MStep> path_step(const MState& state, uint8_t byte) const;
    bool path_allowed(uint64_t hash) const;
    bool file_allowed(const MState& state, uint64_t value) const;
    bool any_file_in(const MState& state, uint64_t low, uint64_t high) const;
    bool number_prefix(const MState& state, uint64_t value, int count) const;
    bool number_done(const MState& state, uint64_t value) const;
    uint64_t number_width(const MState& state) const;
    bool copyable_other(uint32_t own) const;
    bool any_editable() const;
    uint64_t largest_file(const MState& state) const;
    uint64_t lines_of(uint32_t file) const;
    std::string completion_chunk(const MState& state) const;
    std::string number_completion(const MState& state) const;
    std::string path_completion(const MState& state) const;

    bool shape_;
    bool subline_;
    std::vector<FileLines> files_;
    std::vector<bool> editable_;
    std::vector<uint64_t> copyable_;  // files with at least one line, ascending
    std::vector<uint64_t> forbidden_;
    std::vector<Named> named_;
    std::vector<bool> file_named_;
    size_t editable_left_ = 0;  // editable files no section names yet
};

}  // namespace cad::program
