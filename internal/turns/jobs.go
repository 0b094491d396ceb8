package turns

import (
	"context"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/internal/auth"
	"github.com/hangar-dev/hangar/internal/sandbox"
	"github.com/hangar-dev/hangar/internal/store"
)

// MaxEventsPage is the most events one page holds.
const MaxEventsPage = 1000

// ListEvents returns the session's events after seq since, at most limit (1..MaxEventsPage).
func (s *Service) ListEvents(ctx context.Context, p auth.Principal, ref string, since int64, limit int) ([]Event, error) {
	se, err := s.getSession(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	if err := checkPage(since, limit); err != nil {
		return nil, err
	}
	evs, err := s.cfg.Store.ListEvents(ctx, se.ID, since, limit)
	return fromStore(evs, fromStoreEvent), err
}

func checkPage(since int64, limit int) error {
	if since < 0 {
		return fmt.Errorf("%w: since must be 0 or more", ErrInvalid)
	}
	if limit < 1 || limit > MaxEventsPage {
		return fmt.Errorf("%w: limit must be from 1 to %d", ErrInvalid, MaxEventsPage)
	}
	return nil
}

// JobRequest is what a job is made from: a prompt for an agent in a sandbox p may see, or in
// one made for it from SandboxSpec.
type JobRequest struct {
	Prompt      string
	Agent       string
	Sandbox     string
	SandboxSpec *sandbox.CreateRequest // when set (and Sandbox ""), the job makes this sandbox
	Env         map[string]string
	Split       bool   // as CreateSessionRequest's
	SplitUID    uint32 // as CreateSessionRequest's
}

// jobVisible reports whether p may see j: an admin every job; a jobs-only token the jobs it
// created; any other its user's.
func jobVisible(p auth.Principal, j store.Job) bool {
	switch {
	case p.IsAdmin():
		return true
	case jobsOnly(p):
		return j.TokenID == p.TokenID
	default:
		return j.Owner == p.User && (p.Sandbox == "" || j.Sandbox == p.Sandbox)
	}
}

// CreateJob makes what a job needs (a session in the sandbox, one turn) and starts the turn.
func (s *Service) CreateJob(ctx context.Context, p auth.Principal, req JobRequest) (Job, error) {
	j, err := s.createJob(ctx, p, req)
	if err != nil {
		return Job{}, err
	}
	return fromStoreJob(j), nil
}

func (s *Service) createJob(ctx context.Context, p auth.Principal, req JobRequest) (store.Job, error) {
	if _, ok := s.cfg.Agents[req.Agent]; !ok {
		return store.Job{}, fmt.Errorf("%w: unknown agent %q", ErrInvalid, req.Agent)
	}
	if err := checkPrompt(req.Prompt); err != nil {
		return store.Job{}, err
	}
	if err := checkAgentSetup(req.Env, req.Split, req.SplitUID); err != nil {
		return store.Job{}, err
	}
	id := newID("job_")
	created := false
	switch {
	case req.SandboxSpec != nil && req.Sandbox == "":
		spec := *req.SandboxSpec
		if spec.Name == "" {
			spec.Name = "job-" + id[len("job_"):] // a DNS label: newID's text is lowercase letters and digits
		}
		name, err := s.cfg.Sandboxes.Create(ctx, p, spec)
		if err != nil {
			return store.Job{}, err
		}
		req.Sandbox, created = name, true
	case req.SandboxSpec != nil:
		return store.Job{}, fmt.Errorf("%w: give sandbox as a name or as a spec, not both", ErrInvalid)
	}
	sb, err := s.cfg.Sandboxes.Get(ctx, p, req.Sandbox)
	if err != nil {
		return store.Job{}, err
	}
	se := store.Session{ID: newID("ses_"), Name: "job-" + id[len("job_"):], Owner: p.User, TokenID: p.TokenID,
		Sandbox: req.Sandbox, Agent: req.Agent, JobID: id, CreatedAt: s.cfg.Clock.Now().UTC(), Split: req.Split}
	se.Env = s.sealEnv(se.ID, req.Env)
	if req.Split {
		if se.SplitUID, err = s.checkSplit(ctx, req.Sandbox, sb, req.SplitUID); err != nil {
			return store.Job{}, err
		}
	}
	if err := s.cfg.Store.CreateSession(ctx, se); err != nil {
		return store.Job{}, err
	}
	// The job row, naming its turn, exists before the turn starts, so the turn's first events
	// get job seqs.
	j := store.Job{ID: id, TokenID: p.TokenID, Owner: p.User, Sandbox: req.Sandbox, SandboxCreated: created, SessionID: se.ID,
		TurnID: newID("turn_"), CreatedAt: se.CreatedAt}
	if err := s.cfg.Store.CreateJob(ctx, j); err != nil {
		return store.Job{}, err
	}
	if _, err := s.startTurn(ctx, se, j.ID, j.TurnID, req.Prompt); err != nil {
		return store.Job{}, err
	}
	return j, nil
}

// GetJob returns the job id if p may see it.
func (s *Service) GetJob(ctx context.Context, p auth.Principal, id string) (Job, error) {
	j, err := s.getJob(ctx, p, id)
	if err != nil {
		return Job{}, err
	}
	return fromStoreJob(j), nil
}

func (s *Service) getJob(ctx context.Context, p auth.Principal, id string) (store.Job, error) {
	j, err := s.cfg.Store.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !jobVisible(p, j)) {
		return store.Job{}, fmt.Errorf("%w: no job %s", ErrNotFound, id)
	}
	return j, err
}

// ListJobs lists the jobs p may see.
func (s *Service) ListJobs(ctx context.Context, p auth.Principal) ([]Job, error) {
	var (
		js  []store.Job
		err error
	)
	switch {
	case p.IsAdmin():
		js, err = s.cfg.Store.ListJobs(ctx, "", "")
	case jobsOnly(p):
		js, err = s.cfg.Store.ListJobs(ctx, p.TokenID, "")
	default:
		js, err = s.cfg.Store.ListJobs(ctx, "", p.User)
	}
	if err != nil {
		return nil, err
	}
	var out []Job
	for _, j := range js {
		if jobVisible(p, j) {
			out = append(out, fromStoreJob(j))
		}
	}
	return out, nil
}

// JobTurn returns the job's turn.
func (s *Service) JobTurn(ctx context.Context, j Job) (Turn, error) {
	return turnOut(s.cfg.Store.GetTurn(ctx, j.TurnID))
}

// CancelJob cancels the job's turn.
func (s *Service) CancelJob(ctx context.Context, p auth.Principal, id string) (Turn, error) {
	j, err := s.getJob(ctx, p, id)
	if err != nil {
		return Turn{}, err
	}
	t, err := s.cfg.Store.GetTurn(ctx, j.TurnID)
	if err != nil {
		return Turn{}, err
	}
	return turnOut(s.cancelTurn(ctx, t))
}

// ListJobEvents returns the job's events after job seq since, at most limit.
func (s *Service) ListJobEvents(ctx context.Context, p auth.Principal, id string, since int64, limit int) ([]Event, error) {
	j, err := s.getJob(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if err := checkPage(since, limit); err != nil {
		return nil, err
	}
	evs, err := s.cfg.Store.ListJobEvents(ctx, j.ID, since, limit)
	return fromStore(evs, fromStoreEvent), err
}
