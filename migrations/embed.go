// Package migrations embeds hangar's SQL migrations, applied with goose at start: one folder per
// database, kept in step (the same numbers, the same tables).
package migrations

import "embed"

// SQLite holds the migrations for the embedded SQLite store, under sqlite/.
//
//go:embed sqlite/*.sql
var SQLite embed.FS

// Postgres holds the migrations for PostgreSQL, under postgres/.
//
//go:embed postgres/*.sql
var Postgres embed.FS
