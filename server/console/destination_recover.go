package console

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/outboxd/outboxd/destinations"
)

// recoverTimeLayouts are the times the recovery form takes: an RFC 3339
// time, or a browser's datetime-local value, read as UTC.
var recoverTimeLayouts = []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15:04:05"}

// recoverWindow reads the recovery form's window: since (required),
// until (optional) and include_delivered.
func recoverWindow(r *http.Request) (destinations.Recovery, error) {
	w := destinations.Recovery{IncludeDelivered: r.PostFormValue("include_delivered") != ""}
	read := func(field string) (time.Time, bool, error) {
		v := r.PostFormValue(field)
		if v == "" {
			return time.Time{}, false, nil
		}
		for _, layout := range recoverTimeLayouts {
			if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
				return t, true, nil
			}
		}
		return time.Time{}, false, &formError{fmt.Sprintf("%s: want a time such as 2026-01-02T14:00 (UTC), got %q", field, v)}
	}
	since, given, err := read("since")
	if err != nil {
		return w, err
	}
	if !given {
		return w, &formError{"since: required: the time from which to send events again (UTC)"}
	}
	w.Since = since
	until, given, err := read("until")
	if err != nil {
		return w, err
	}
	if given {
		w.Until = &until
	}
	return w, nil
}

// recoverDestination counts a destination's events of the form's window
// (found through the scope's tenant) and asks for confirmation on a page
// showing the count, whose form carries the count's token; confirmed, it
// sends exactly those again. When they changed since, nothing is sent
// and the page asks again with the new count (409), as the redrive's
// does. In the portal it is the tenant's "send me again everything since
// 14:00".
func (c *Console) recoverDestination(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	window, err := recoverWindow(r)
	if err != nil {
		c.destinationFailed(w, r, scope, "recover", err)
		return
	}
	ctx, cancel := c.context(r)
	defer cancel()
	id := r.PathValue("id")
	token := r.PostFormValue("token")
	plan := func(status int, count destinations.RecoverCount, changed bool) {
		c.render(w, r, status, "destination_recover", map[string]any{"Scope": scope, "ID": id, "Self": scope.page(id),
			"Plan": count, "Since": r.PostFormValue("since"), "Until": r.PostFormValue("until"),
			"IncludeDelivered": window.IncludeDelivered, "Changed": changed})
	}
	if r.PostFormValue("confirm") != "yes" || token == "" {
		count, err := c.opt.Destinations.CountRecover(ctx, c.opt.DB, scope.Tenant, id, window)
		if err != nil {
			c.destinationFailed(w, r, scope, "count the events to recover", err)
			return
		}
		plan(http.StatusOK, count, false)
		return
	}
	done, err := c.opt.Destinations.Recover(ctx, c.opt.DB, scope.actor(r), scope.Tenant, id, window, token)
	switch {
	case errors.Is(err, destinations.ErrRecoveryChanged):
		plan(http.StatusConflict, done, true)
		return
	case errors.Is(err, destinations.ErrInvalidToken):
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("token: %q is not the token of a count; nothing was sent again.", token))
		return
	case err != nil:
		c.destinationFailed(w, r, scope, "recover", err)
		return
	}
	c.logChange(r, scope, "recovered", id, "dead", done.Dead, "delivered", done.Delivered)
	c.render(w, r, http.StatusOK, "destination_done", map[string]any{"Scope": scope, "Self": scope.page(id), "Title": "Events sent again",
		"Said": fmt.Sprintf("Sent again: %d (%d that had failed, %d delivered before), each under its original webhook-id.",
			done.Rows, done.Dead, done.Delivered),
		"Rows": done.Rows})
}
