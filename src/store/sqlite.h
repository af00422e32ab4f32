#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace tb::sql {

// A failed SQLite call: SQLite's message, and its primary result code so a caller can tell a
// full disk or a read-only file (SQLITE_FULL, SQLITE_READONLY, ...) from a bug.
class Error : public std::runtime_error {
 public:
  Error(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// The few pieces of SQLite's C API the store uses, with ownership and errors handled.
// Every failure throws sql::Error carrying SQLite's message and result code.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& bind(int i, const std::string& v);
  Statement& bind(int i, int64_t v);
  Statement& bind(int i, double v);
  Statement& bind_null(int i);
  bool step();  // true while a row is available
  void run();   // step to completion, then reset for reuse
  void reset();
  int64_t integer(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  bool is_null(int col) const;
  int type(int col) const { return sqlite3_column_type(stmt_, col); }
  int columns() const;
  std::string column_name(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database {
 public:
  Database(const std::string& path, int flags);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  void exec(const std::string& sql);
  Statement prepare(const std::string& sql) { return Statement(db_, sql); }
  int64_t last_insert_id() const { return sqlite3_last_insert_rowid(db_); }
  sqlite3* handle() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back if not committed.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace tb::sql
