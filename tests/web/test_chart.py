"""The score chart's numbers: round ticks on both axes, nothing drawn for a run with no turn yet."""

from frobozz.runner import TurnRecord
from frobozz.web._chart import HEIGHT, WIDTH, nice_step, score_chart


def turn(n: int, score: int | None) -> TurnRecord:
    return TurnRecord(
        turn=n, command="look", text="", score=score, moves=n, location="West of House", done=False, won=False
    )


def test_a_run_with_no_turn_yet_has_an_empty_chart():
    chart = score_chart([], 350)
    assert chart.empty and chart.x_ticks == () and chart.y_ticks == ()


def test_ticks_are_round_numbers_from_zero_at_most_five_steps_apart():
    assert [nice_step(span) for span in (1, 4, 5, 6, 12, 45, 350, 1000, 7001)] == [1, 1, 1, 2, 5, 10, 100, 200, 2000]
    chart = score_chart([turn(n, 5 * (n // 4)) for n in range(1, 46)], 350)
    assert [t.label for t in chart.x_ticks] == ["0", "10", "20", "30", "40"]
    assert [t.label for t in chart.y_ticks] == ["0", "100", "200", "300"] and chart.max_score == 350
    assert chart.x_ticks[0].at == chart.left and chart.y_ticks[0].at == chart.bottom  # 0 where the axes meet
    for x, y in (map(float, p.split(",")) for p in chart.points.split()):
        assert chart.left <= x <= chart.right <= WIDTH and 0 <= chart.top_y <= y <= chart.bottom <= HEIGHT


def test_a_game_without_a_maximum_scales_to_the_best_score_and_a_missing_score_counts_as_zero():
    chart = score_chart([turn(1, None), turn(2, 7)], None)
    assert chart.top == 7 and chart.max_line is None and [t.label for t in chart.y_ticks][-1] == "6"
    assert [t.label for t in chart.x_ticks] == ["0", "1", "2"]
