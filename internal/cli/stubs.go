package cli

import "github.com/spf13/cobra"

func (a *app) logsCmd() *cobra.Command  { return &cobra.Command{Use: "logs"} }
func (a *app) jobsCmd() *cobra.Command  { return &cobra.Command{Use: "jobs"} }
func (a *app) fleetCmd() *cobra.Command { return &cobra.Command{Use: "fleet"} }
