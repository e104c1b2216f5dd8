package slots

import "testing"

// Freed, after ForgetFreed, says only that a slot was freed since: a loop
// that counted its room after a slot was freed must not wake for that
// slot again. (Mutation: ForgetFreed doing nothing fails this test.)
func TestForgetFreedDropsASlotFreedBefore(t *testing.T) {
	s := New(2, 1)
	s.Take()
	s.Take()
	s.Give()
	s.ForgetFreed()
	select {
	case <-s.Freed():
		t.Fatal("Freed reported a slot freed before ForgetFreed")
	default:
	}
	s.Give()
	select {
	case <-s.Freed():
	default:
		t.Fatal("Freed did not report a slot freed after ForgetFreed")
	}
}
